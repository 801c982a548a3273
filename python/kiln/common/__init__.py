"""kiln.common -- dtypes, Tensor and initializers, as in mindspore.common."""
