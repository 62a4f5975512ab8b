"""The LLM client (retries, cache, validated replies), prompt files and the synthesis backend protocol."""
