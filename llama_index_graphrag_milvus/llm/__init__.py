"""The LLM's part, and the untrusted text it returns: which LLM `llm=` means (`resolve`), every prompt
(`prompts`), strict JSON parsing (`parsing`), the entities a question names, known or by LLM NER
(`mentions`), the rerank call (`rerank`), and how every LLM call is bounded during an outage: a deadline
and a circuit breaker per LLM object, and how a sync form runs its async body (`guard`).

May import: `schema`; nothing that touches Milvus.
"""
