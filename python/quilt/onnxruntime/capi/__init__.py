"""onnxruntime.capi on Quilt: the modules clients import from it."""
