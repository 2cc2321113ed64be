"""Model math that the ONNX graphs, the runtime and the numpy reference share: rotary
angles, hidden-state statistics, the vision grid. The reference checks the engine only
where they differ, so this code is checked against HF transformers on its own."""
