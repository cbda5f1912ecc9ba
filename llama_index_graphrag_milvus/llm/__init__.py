"""The LLM's part: which LLM `llm=` means, every prompt, strict parsing of its answers, NER, the rerank
call, and each call's deadline and circuit breaker (`guard`). May import `schema`; nothing of Milvus."""
