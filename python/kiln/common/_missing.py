"""Module-level __getattr__ for kiln, kiln.ops and kiln.nn: a MindSpore name kiln does not have
yet raises an AttributeError that says so and points at docs/compatibility.md (the coverage
list), instead of Python's bare "has no attribute"."""
import importlib
import importlib.util

DOC = "docs/compatibility.md"

# Names left out on purpose: their results are complex tensors, and kiln has no complex dtypes
# (docs/compatibility.md, "Excluded").
_COMPLEX = frozenset("""eig eigvals Eig fft fft2 fftn ifft ifft2 ifftn rfft rfft2 rfftn irfft irfft2
irfftn hfft hfft2 hfftn ihfft ihfft2 ihfftn FFTWithSize Complex complex polar Polar view_as_real
""".split())


def missing_attribute(module_name, mindspore_name):
    """A __getattr__(name) for module `module_name` (whose MindSpore counterpart is
    `mindspore_name`). A submodule file that exists but was not imported yet is imported and
    returned, as `import module.name` would."""

    def __getattr__(name):
        if name.startswith("__") and name.endswith("__"):
            # Dunder probes (copy, pickle, doctest, IDEs) get Python's usual error.
            raise AttributeError(f"module '{module_name}' has no attribute '{name}'")
        try:
            spec = importlib.util.find_spec(f"{module_name}.{name}")
        except ModuleNotFoundError:  # module_name is a module, not a package: no submodules
            spec = None
        if spec is not None:
            return importlib.import_module(f"{module_name}.{name}")
        if name in _COMPLEX:
            raise AttributeError(
                f"module '{module_name}' has no attribute '{name}': {mindspore_name}.{name} "
                f"returns complex tensors, and kiln has no complex dtypes, so it is excluded "
                f"(see {DOC}, 'Excluded').")
        raise AttributeError(
            f"module '{module_name}' has no attribute '{name}': {mindspore_name}.{name} is not "
            f"in kiln yet. {DOC} lists what kiln covers per namespace.")

    return __getattr__
