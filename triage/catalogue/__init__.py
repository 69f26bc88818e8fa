"""vLLM's and its libraries' own messages, mined from their source (scripts/mine_messages.py), and the
map from where code lives to the failure category it stands for."""
