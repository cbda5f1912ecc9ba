"""The offline extractor's work grows linearly with hostile text: a long run of one name joined by
connectors, with no sentence break, once cost time quadratic in its length (10 s at 88k characters).

The work is counted, not timed: the Python lines run (every frame, the extractor's helpers and
`normalize_name` included) while extracting a text and the same text four times over.
"""

import sys

import pytest

from llama_index_graphrag_milvus import CooccurrenceExtractor

# every span of these names the same entity ("Foyt", "A. J. Foyt"), so that no pair qualifies and a
# scan of every pair of spans never stops early
HOSTILE = ["Foyt of the de la Van ", "Mr. A. J. Foyt of the de la Van ", "Smith and "]


def lines_run(text: str) -> int:
    """The number of Python lines run by `CooccurrenceExtractor().extract(text)`."""
    extractor = CooccurrenceExtractor()
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    previous = sys.gettrace()
    sys.settrace(lambda frame, event, arg: local)
    try:
        extractor.extract(text)
    finally:
        sys.settrace(previous)
    return count


@pytest.mark.parametrize("unit", HOSTILE)
def test_four_times_the_text_costs_at_most_five_times_the_work(unit):
    repeats = 2200 // len(unit)  # about 2,200 and 8,800 characters: whole units, so no stray name ends it
    small, large = lines_run(unit * repeats), lines_run(unit * 4 * repeats)

    assert large <= 5 * small, f"{large / small:.1f}x the work for 4x the text"


def test_the_hostile_text_has_one_name_and_no_pair():
    triplets = CooccurrenceExtractor().extract("Foyt of the de la Van " * 100)

    assert triplets == []
