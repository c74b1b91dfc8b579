"""grid-serve: logits processors, the vLLM backend and the serving contract."""
