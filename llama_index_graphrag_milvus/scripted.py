"""Scripted LLMs that stand in for real ones in benchmarks: they read the rerank prompt as a model would
(the offered relations are the lines `[id] text` after the example) and answer in its JSON.

- `oracle_llm(gold)`: picks exactly the offered relations that the question's gold passages state;
- `random_llm(n)`: picks `n` offered relations at random (a weak model);
- `garbage_llm()`: answers prose, never JSON (a broken model).

NER prompts get `{"named_entities": []}` (the retriever still matches the known names in the question).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Callable, Dict, List, Set, Tuple

from llama_index.core.llms import CompletionResponse, CompletionResponseGen, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

_LINE = re.compile(r"^\[(\d+)\] (.*)$", re.M)
_QUESTION = re.compile(r"^Question: (.*)$", re.M)


def read_rerank_prompt(prompt: str) -> Tuple[str, List[Tuple[int, str]]]:
    """The question and the offered `(id, text)` lines of the real task in a rerank prompt."""
    task = prompt.split("Now the real task.", 1)[-1]
    question = _QUESTION.search(task)
    return (question.group(1).strip() if question else ""), [(int(n), t) for n, t in _LINE.findall(task)]


class ScriptedLLM(CustomLLM):
    """Answers rerank prompts with `choose(question, offered [(id, text)]) -> ids` (None: `fallback`);
    NER prompts with no names; anything else with `fallback`."""

    choose: Callable[..., Any]
    fallback: str = "I cannot answer that."

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        if '"named_entities"' in prompt:
            return CompletionResponse(text=json.dumps({"named_entities": []}))
        if '"useful_relationships"' in prompt:
            question, offered = read_rerank_prompt(prompt)
            chosen = self.choose(question, offered)
            if chosen is None:
                return CompletionResponse(text=self.fallback)
            texts = dict(offered)
            lines = [f"[{n}] {texts[n]}" for n in chosen if n in texts]
            answer = {"thought_process": "scripted", "useful_relationships": lines, "ids": list(chosen)}
            return CompletionResponse(text=json.dumps(answer))
        return CompletionResponse(text=self.fallback)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        yield self.complete(prompt)


def normalized(text: str) -> str:
    """Lower case, whitespace collapsed: how the oracle compares relation texts."""
    return " ".join(text.lower().split())


def oracle_llm(gold: Dict[str, Set[str]]) -> ScriptedLLM:
    """Picks the offered relations whose text is one of `gold[question]` (normalised), in offered order."""
    wanted = {normalized(q): {normalized(t) for t in texts} for q, texts in gold.items()}

    def choose(question: str, offered: List[Tuple[int, str]]) -> List[int]:
        stated = wanted.get(normalized(question), set())
        return [n for n, text in offered if normalized(text) in stated]

    return ScriptedLLM(choose=choose)


def random_llm(n: int = 3, seed: int = 0) -> ScriptedLLM:
    """Picks `n` offered relations at random (seeded by the question, so runs repeat)."""

    def choose(question: str, offered: List[Tuple[int, str]]) -> List[int]:
        rng = random.Random(f"{seed}\x1f{question}")
        return [number for number, _ in rng.sample(offered, min(n, len(offered)))]

    return ScriptedLLM(choose=choose)


def garbage_llm() -> ScriptedLLM:
    """Never answers JSON."""
    return ScriptedLLM(choose=lambda question, offered: None, fallback="Sure! Here are some thoughts: [unclear]")
