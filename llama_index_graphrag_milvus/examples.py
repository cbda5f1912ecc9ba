"""A tiny multi-hop corpus, shared by the demo, the notebook and the tests: the Bernoulli family and Euler.

The question "What contribution did the son of Euler's teacher make?" needs three hops (Euler → his
teacher Johann → Johann's son Daniel → Daniel's contributions), and the passage that answers it says
nothing about Euler. Names are deliberately messy, as LLM-extracted triplets are ("leonhard Euler",
"Euler").
"""

from __future__ import annotations

from typing import List

from llama_index.core.schema import Document

EULER_QUESTION = "What contribution did the son of Euler's teacher make?"
#: The id of the passage that answers `EULER_QUESTION`.
ANSWER_DOC_ID = "bernoulli-daniel"

_PASSAGES = [
    (
        "bernoulli-jakob",
        "Jakob Bernoulli (1655-1705) was a Swiss mathematician from Basel and the elder brother of Johann "
        "Bernoulli. In Ars Conjectandi he founded the mathematical theory of probability, proved the first "
        "law of large numbers and discovered the constant e.",
        [
            ["Jakob Bernoulli", "was", "Swiss mathematician"],
            ["Jakob Bernoulli", "elder brother of", "Johann Bernoulli"],
            ["Jakob Bernoulli", "wrote", "Ars Conjectandi"],
            ["Jakob Bernoulli", "founded", "theory of probability"],
            ["Jakob Bernoulli", "discovered", "constant e"],
        ],
    ),
    (
        "bernoulli-johann",
        "Johann Bernoulli (1667-1748), Jakob's younger brother, was a Swiss mathematician who developed "
        "infinitesimal calculus with Leibniz. As professor at the University of Basel he taught Leonhard "
        "Euler, whose talent he recognised early.",
        [
            ["Johann Bernoulli", "younger brother of", "Jakob Bernoulli"],
            ["Johann Bernoulli", "developed", "infinitesimal calculus"],
            ["Johann Bernoulli", "professor at", "University of Basel"],
            ["Johann Bernoulli", "taught", "Leonhard Euler"],
        ],
    ),
    (
        "bernoulli-daniel",
        "Daniel Bernoulli (1700-1782) was the son of Johann Bernoulli. In Hydrodynamica he stated "
        "Bernoulli's principle, founding fluid dynamics, and he made early contributions to probability "
        "and statistics, including the St. Petersburg paradox.",
        [
            ["Daniel Bernoulli", "son of", "Johann Bernoulli"],
            ["Daniel Bernoulli", "wrote", "Hydrodynamica"],
            ["Daniel Bernoulli", "stated", "Bernoulli's principle"],
            ["Daniel Bernoulli", "contributed to", "fluid dynamics"],
            ["Daniel Bernoulli", "contributed to", "probability and statistics"],
        ],
    ),
    (
        "euler",
        "Leonhard Euler (1707-1783) was a Swiss mathematician who studied under Johann Bernoulli at the "
        "University of Basel. Euler made pioneering contributions to analysis, number theory and graph "
        "theory, and introduced much of modern mathematical notation.",
        [
            ["leonhard Euler", "studied under", "Johann Bernoulli"],
            ["Leonhard Euler", "studied at", "University of Basel"],
            ["Euler", "made contributions to", "analysis"],
            ["Euler", "made contributions to", "graph theory"],
            ["Leonhard Euler", "introduced", "modern mathematical notation"],
        ],
    ),
    (
        "basel",
        "Basel is a city on the Rhine in northwestern Switzerland. Its university, founded in 1460, is the "
        "oldest in the country and counts several mathematicians among its alumni.",
        [
            ["Basel", "lies on", "Rhine"],
            ["University of Basel", "located in", "Basel"],
            ["University of Basel", "founded in", "1460"],
        ],
    ),
]


_TITLES = {
    "bernoulli-jakob": "Jakob Bernoulli",
    "bernoulli-johann": "Johann Bernoulli",
    "bernoulli-daniel": "Daniel Bernoulli",
    "euler": "Leonhard Euler",
    "basel": "Basel",
}


def bernoulli_documents() -> List[Document]:
    """The corpus as LlamaIndex `Document`s with stable ids and their triplets in metadata (kept out of
    the embedded text and the LLM context: they are data, not text)."""
    return [
        Document(
            id_=doc_id, text=text, metadata={"title": _TITLES[doc_id], "triplets": triplets},
            excluded_embed_metadata_keys=["triplets"], excluded_llm_metadata_keys=["triplets"],
        )
        for doc_id, text, triplets in _PASSAGES
    ]
