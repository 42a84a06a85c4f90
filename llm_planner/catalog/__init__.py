"""What robots can do: skill sets, plan grammars, execution-time models, the tokenizer."""
