"""ONNX graphs of the models: the decoder (engine.graph.decoder, its blocks in attention, moe,
linear and norms) and the vision towers, written with GraphBuilder (engine.graph.builder)."""
