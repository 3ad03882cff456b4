"""Generative models on the farm: a prompt prefilled, tokens decoded one at a time (docs/generate.md).

`spec` parses what a generation job asks for, `trace` holds what a unit measured, `folder` reads
an ONNX Runtime GenAI model folder, `metrics` derives the job's figures, `reference` generates
greedily on the host. Nothing here imports onnxruntime_genai at import time.
"""
