"""The entities a question names: known entity names found in its text, or an LLM's named-entity answer."""

from __future__ import annotations

import re
from typing import Any, Callable, List, Optional, Tuple

import numpy as np
from llama_index.core.llms.llm import LLM
from llama_index.core.prompts import PromptTemplate

from llama_index_graphrag_milvus.llm.guard import ask
from llama_index_graphrag_milvus.llm.parsing import parse_json_object
from llama_index_graphrag_milvus.schema import entity_id, normalize_name

#: Words of a question read for known names; the rest is ignored (a question is not a document).
MAX_QUESTION_WORDS = 512
#: Characters of a run of CJK text read for known names.
MAX_CJK_CHARACTERS = 1024
#: Mentions kept from an LLM's answer.
MAX_MENTIONS = 20

_WORD = re.compile(r"\w+", re.UNICODE)
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_MAX_CJK_NAME = 16
_STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his how in is it its of on or "
    "she that the their them they this to was were what when where which who whom whose why will with".split()
)

#: Whether each entity id (int64 array) is stored: the store's `has_entities`.
IsKnown = Callable[[np.ndarray], np.ndarray]


def known_names(text: str, is_known: IsKnown, max_words: int = 6) -> List[str]:
    """Known entity names occurring in `text`: longest matches first, non-overlapping, normalized. Every
    candidate n-gram is looked up in one call of `is_known`, so the cost follows the question's length
    (capped at `MAX_QUESTION_WORDS` words and `MAX_CJK_CHARACTERS` a CJK run), never the graph."""
    words = [normalize_name(w) for w in _WORD.findall(text)[:MAX_QUESTION_WORDS]]
    spans = [(i, n) for i in range(len(words)) for n in range(1, min(max_words, len(words) - i) + 1)]
    spans = [(i, n) for i, n in spans if n > 1 or words[i] not in _STOPWORDS]  # no stopword is a name
    found = _greedy(words, spans, " ".join, is_known)
    # scripts written without spaces (Chinese, Japanese, Korean): longest known names within each run
    for run in _CJK_RUN.findall(normalize_name(text)):
        run = run[:MAX_CJK_CHARACTERS]
        spans = [(i, n) for i in range(len(run)) for n in range(2, min(_MAX_CJK_NAME, len(run) - i) + 1)]
        found += _greedy(list(run), spans, "".join, is_known)
    return list(dict.fromkeys(found))


def _greedy(tokens: List[str], spans: List[tuple], join: Callable, is_known: IsKnown) -> List[str]:
    """Left to right, the longest known span at each position (spans are (start, length))."""
    if not spans:
        return []
    names = [join(tokens[i : i + n]) for i, n in spans]
    known = is_known(np.fromiter((entity_id(name) for name in names), np.int64, len(names)))
    best = {}
    for (i, n), name, hit in zip(spans, names, known.tolist()):
        if hit and n > best.get(i, (0, ""))[0]:
            best[i] = (n, name)
    found, i = [], 0
    while i < len(tokens):
        n, name = best.get(i, (1, ""))
        if name:
            found.append(name)
        i += n
    return found


def read_mentions(answer: Any) -> List[str]:
    """The names (the strings) in an NER answer `{"named_entities": [...]}`, also fenced or with prose
    around it. Raises `ValueError` if there is no such list."""
    items = parse_json_object(answer).get("named_entities")
    if not isinstance(items, list):
        raise ValueError(f"expected 'named_entities' to be a list, got {items!r:.200}")
    return list(dict.fromkeys(m.strip() for m in items if isinstance(m, str) and m.strip()))[:MAX_MENTIONS]


async def question_mentions(
    query: str, is_known: IsKnown, llm: Optional[LLM], prompt: PromptTemplate
) -> Tuple[List[str], bool]:
    """The entities a question names: with an LLM, its names first, then the known names it missed (they
    cost nothing); without one, or when its call failed, the known names alone (exactly what `llm=None`
    gives); and whether the LLM's call gave no answer (the question's rerank is then skipped too)."""
    known = known_names(query, is_known)
    if llm is None:
        return known, False
    fallback = "the known entity names in the question stand (after no answer, its LLM rerank is skipped)"
    by_llm, failed = await ask(llm, "ner", read_mentions, fallback, prompt, query_str=query)
    if failed:
        return known, True
    by_llm = by_llm or []  # an unusable answer names none
    seen = {name.lower() for name in by_llm}
    return (by_llm + [name for name in known if name.lower() not in seen])[:MAX_MENTIONS], False
