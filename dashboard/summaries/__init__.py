"""Stage 2 of session search: the summary service, the LLM client, the recap."""
