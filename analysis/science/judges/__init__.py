"""MLLM judges: prompts (``prompts``), the chat client (``client``), reply parsing (``parsing``),
image preparation (``images``) and per-kind evaluators (``evaluators``). No Django here; the
runner that reads items and writes JudgeScore rows is ``analysis.judge_services``."""
