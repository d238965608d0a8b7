"""The live widget: the checkpoint exported to ONNX for the browser (make widget), and its checks against torch."""
