// outputs.cc - a compiled graph's output tree from and to Python objects.
#include "outputs.h"

#include <nanobind/stl/string.h>

namespace kiln::bind {

namespace {

using Kind = ir::OutputTree::Kind;

[[noreturn]] void BadSpec(const char* what) {
  throw nb::type_error((std::string("jit: malformed output signature: ") + what).c_str());
}

// Only values that come back as themselves: exact bool, int (int64), float, str and None.
ir::Literal ToLiteral(nb::handle v) {
  if (v.is_none()) return std::monostate{};
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (PyLong_CheckExact(v.ptr())) return ToInt64(v, "an int64 output constant");
  if (PyFloat_CheckExact(v.ptr())) return PyFloat_AS_DOUBLE(v.ptr());
  if (PyUnicode_CheckExact(v.ptr())) return nb::cast<std::string>(v);
  BadSpec("a literal must be None, bool, int, float or str");
}

nb::object FromLiteral(const ir::Literal& value) {
  if (auto* b = std::get_if<bool>(&value)) return nb::bool_(*b);
  if (auto* i = std::get_if<int64_t>(&value)) return nb::int_(*i);
  if (auto* d = std::get_if<double>(&value)) return nb::float_(*d);
  if (auto* s = std::get_if<std::string>(&value)) return nb::str(s->data(), s->size());
  return nb::none();
}

int64_t Index(nb::handle h) {
  if (!PyLong_CheckExact(h.ptr())) BadSpec("an index must be an int");
  return ToInt64(h, "an output index");
}

ir::OutputTree ToTree(nb::handle spec, int depth) {
  if (depth > ir::kMaxOutputDepth)
    throw nb::value_error("jit: the result nests tuples, lists and dicts too deep for a graph");
  if (!nb::isinstance<nb::tuple>(spec) || nb::len(spec) != 2) BadSpec("expected (kind, value)");
  const std::string kind = nb::cast<std::string>(spec[0]);
  nb::handle value = spec[1];
  if (kind == "result") return ir::OutputTree::ResultLeaf(Index(value));
  if (kind == "opaque") return ir::OutputTree::OpaqueLeaf(Index(value));
  if (kind == "literal") return ir::OutputTree::LiteralLeaf(ToLiteral(value));
  std::vector<ir::OutputTree> keys, items;
  for (nb::handle item : value) {
    if (kind != "dict") {
      items.push_back(ToTree(item, depth + 1));
      continue;
    }
    if (!nb::isinstance<nb::tuple>(item) || nb::len(item) != 2) BadSpec("expected (key, value)");
    keys.push_back(ToTree(item[0], depth + 1));
    items.push_back(ToTree(item[1], depth + 1));
  }
  if (kind == "dict") return ir::OutputTree::Dict(std::move(keys), std::move(items));
  if (kind == "tuple" || kind == "list")
    return ir::OutputTree::Sequence(kind == "tuple" ? Kind::Tuple : Kind::List, std::move(items));
  BadSpec("unknown node kind");
}

}  // namespace

ir::OutputTree ToOutputTree(nb::handle spec) { return ToTree(spec, 1); }

nb::object TreeToSpec(const ir::OutputTree& tree) {
  switch (tree.kind) {
    case Kind::Result:
      return nb::make_tuple("result", tree.index);
    case Kind::Literal:
      return nb::make_tuple("literal", FromLiteral(tree.literal));
    case Kind::Opaque:
      return nb::make_tuple("opaque", tree.index);
    case Kind::Dict: {
      nb::list items;
      for (size_t i = 0; i < tree.items.size(); ++i)
        items.append(nb::make_tuple(TreeToSpec(tree.keys.at(i)), TreeToSpec(tree.items[i])));
      return nb::make_tuple("dict", items);
    }
    default: {
      nb::list items;
      for (const auto& item : tree.items) items.append(TreeToSpec(item));
      return nb::make_tuple(tree.kind == Kind::List ? "list" : "tuple", items);
    }
  }
}

nb::object BuildOutputs(const ir::OutputTree& tree, std::vector<Tensor>& outputs,
                        const nb::tuple& opaque) {
  switch (tree.kind) {
    case Kind::Result:
      return Wrap(std::move(outputs.at(tree.index)));
    case Kind::Literal:
      return FromLiteral(tree.literal);
    case Kind::Opaque:
      if (tree.index >= static_cast<int64_t>(opaque.size()))
        throw nb::index_error("jit: the graph's result needs an opaque value it was not given");
      return nb::borrow(opaque[static_cast<size_t>(tree.index)]);
    case Kind::Dict: {
      nb::dict out;
      for (size_t i = 0; i < tree.items.size(); ++i) {
        nb::object key = BuildOutputs(tree.keys.at(i), outputs, opaque);
        out[key] = BuildOutputs(tree.items[i], outputs, opaque);
      }
      return out;
    }
    default: {
      nb::list items;
      for (const auto& item : tree.items) items.append(BuildOutputs(item, outputs, opaque));
      if (tree.kind == Kind::List) return items;
      return nb::tuple(items);
    }
  }
}

}  // namespace kiln::bind
