"""Tuning the bundled model for the skill sets: the corpus, the LoRA fine-tune, the tuned model folder."""
