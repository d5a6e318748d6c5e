"""OPSD trainer: LoRA student, adapter-disabled fixed teacher, on-policy rollouts, generalized JSD."""
