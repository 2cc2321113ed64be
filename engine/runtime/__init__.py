"""Running a model: ONNX Runtime sessions, sampling, the generation loop and its events."""
