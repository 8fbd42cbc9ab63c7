"""The roles and their trainers: tokenizer, policies and adapters, the model loaders, the agent and simulator roles, the
GRPO and RWR trainers, and the warm start.
"""
