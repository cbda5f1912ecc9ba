"""The LLM's part, and the untrusted text it returns: which LLM `llm=` means (`resolve`), every prompt
(`prompts`), strict JSON parsing (`parsing`), the entities a question names, known or by LLM NER
(`mentions`), and the rerank call (`rerank`).

May import: `schema`; nothing that touches Milvus.
"""
