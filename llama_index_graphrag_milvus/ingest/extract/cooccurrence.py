"""Triplets from raw text with no LLM and no model: named-entity-like spans that co-occur in a sentence.

In the spirit of LazyGraphRAG / graphrag's "fast" indexing (noun phrases and their co-occurrence within
text units), with regular expressions and capitalisation only, so that it installs nothing, downloads
nothing and costs a few milliseconds per passage.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from heapq import heapify, heappop, heappush
from typing import Any, Collection, Dict, List, Optional, Sequence, Tuple

from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent

from llama_index_graphrag_milvus.ingest.extract.given import (
    TRIPLETS_KEY, as_metadata, exclude_from_content, given_triplets, is_chunk, title_links,
)
from llama_index_graphrag_milvus.schema import Triplet, normalize_name, parse_triplets

# a word: letters/digits, with inner apostrophes, hyphens, dots and ampersands ("O'Neil", "U.S", "AT&T")
_TOKEN = re.compile(r"\w+(?:['’.\-&]\w+)*")
# a sentence ends at . ! ? (then space) or at a CJK full stop; a paragraph break ends one too. A run
# of . ! ? is tried from its first character only: tried from each of its characters, a long run with
# no space after it ("!!!!...") cost time quadratic in its length, for the same matches
_END = re.compile(r"(?<![.!?])[.!?]+[\"'”’)\]]*\s+|[。！？；]+|\n\s*\n")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# titles and names quoted in CJK text: 《...》 〈...〉 「...」 『...』 “...”
_CJK_QUOTED = re.compile(r"《([^《》]{1,30})》|〈([^〈〉]{1,30})〉|「([^「」]{1,30})」|『([^『』]{1,30})』|“([^“”]{1,30})”")
_JOIN = re.compile(r"[^\S\n]{1,2}|-")  # what may separate the words of one name
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")

#: Lower-case words allowed inside a name, between capitalised words ("University of Copenhagen",
#: "Lord of the Rings", "Charles de Gaulle", "Ludwig van Beethoven").
CONNECTORS = frozenset("of the de del della di da du des la le von van der den y for".split())

# capitalised words that start sentences or headings but name nothing on their own
_COMMON = frozenset(
    """a an the in on at by for from with of to and but or nor if then so as also both either neither
    he she it they we i you his her its their our my your him them us this that these those there here
    who whom whose what which where when why how after before during while although though however
    since until unless because despite meanwhile moreover furthermore thus hence therefore later
    earlier today yesterday tomorrow now once many most some several each every all any no not one two
    three other another such only even still yet born following according among between within without
    about above below under over into onto through throughout upon near like unlike is was are were be
    been being has have had do does did can could may might must shall should will would mr mrs ms dr
    st jr sr inc ltd co vs no see note notes external links references chapter part section yes""".split()
)
_MONTHS = frozenset("january february march april may june july august september october november december "
                    "monday tuesday wednesday thursday friday saturday sunday".split())
_ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr mt ft inc ltd co corp vs no gen col lt sgt rev prof est approx".split())


def with_text_links(
    nodes: Sequence[BaseNode],
    triplets: Sequence[Optional[List[Triplet]]],
    skip: Collection[int] = (),
    extractor: Optional["CooccurrenceExtractor"] = None,
) -> Tuple[List[List[Triplet]], List[List[Triplet]]]:
    """Each node's triplets followed by what its text adds that they do not state yet (nodes at `skip` as
    they are), and the links added to each node not skipped; so triplets add to the text's graph:
    - the links `extractor` (default: `CooccurrenceExtractor()`) gives its text alone: its topic is its
      `metadata["title"]`, else, for a whole document, its heading line (a chunk's first line is none);
    - with `link_title`, its topic linked to each name the triplets state (`given.title_links`): the
      passage stays about its topic (at least half its relations name it), whatever else they state."""
    extractor = extractor or CooccurrenceExtractor()
    linked, added = [list(t or []) for t in triplets], []
    for i, node in enumerate(nodes):
        if i not in skip:
            whole = not is_chunk(node)
            links = extractor.extract_node(node, guess_title=whole)
            topic = extractor.topic_of(node, whole) if extractor.link_title and linked[i] else None
            links += title_links(topic, linked[i], links) if topic else []
            stated = {t.id for t in linked[i]}
            added.append([t for t in links if t.id not in stated])
            linked[i] += added[-1]
    return linked, added


def _sentences(text: str) -> List[Tuple[int, int]]:
    """(start, end) character spans of the sentences of `text`, not cut after "Dr." or "J."."""
    spans, start = [], 0
    for match in _END.finditer(text):
        before = _TOKEN.findall(text[max(start, match.start() - 12) : match.start()])
        word = before[-1] if before else ""
        if match.group().startswith(".") and (len(word) == 1 and word.isupper() or word.lower() in _ABBREVIATIONS):
            continue
        spans.append((start, match.start() + 1 if match.group()[0] in ".!?" else match.start()))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def _capitalised(word: str) -> bool:
    return word[:1].isupper()


class CooccurrenceExtractor(TransformComponent):
    """Triplets from raw text, with no LLM and nothing to download: named-entity-like spans that occur
    in the same sentence, linked by the words between them.

    - **Entities** are capitalised word sequences, with lower-case connectors inside them
      ("University of Copenhagen", "Lord of the Rings", "Charles de Gaulle"), numbers after a
      capitalised word ("Apollo 11", "January 1960"), initials ("Ann B. Davis", with `initials`) and,
      with `years`, four-digit years. Leading articles are dropped ("The Journal of ..." → "Journal of
      ..."), as are a possessive "'s" and, at the start of a sentence, common words ("However", "In").
    - **Relations**: within each sentence, pairs of entities, nearest first, at most
      `max_relations_per_sentence`; the predicate is the words between them (at most
      `max_predicate_words`; "with" when nothing is between). With `link_title`, the passage's topic
      (`metadata["title"]`, else a short first line without a full stop, as in "Title\\ntext") is linked
      to every entity of the passage, the predicate being the 3 words before and the 3 after it. With
      `topic_as_name`, the topic is named as other passages mention it: without a qualifier in
      brackets and a leading article ("Mark King (musician)" → "Mark King", "The Jump" → "Jump"), so
      that a passage naming it reaches this one. At most `max_relations_per_node` relations a
      passage: embedding them is the ingest's cost.
    - **Chinese, Japanese, Korean**: there are no capitals and no spaces, so no spans are guessed from
      the CJK text itself; what is extracted there is the Latin-script names and years inside it, the
      names quoted in 《》〈〉「」『』“”, and the title. Sentences end at 。！？；. Nothing raises.

    Nodes that already carry triplets (`metadata[triplets_key]` or a KG extractor's output) are left
    as they are. The triplets are written to `metadata[triplets_key]`, kept out of the embedded text,
    where `GraphRAGTransform` reads them; use `extract(text, title)` for the triplets alone.

    Attributes:
        max_relations_per_sentence: Entity pairs kept per sentence.
        max_relations_per_node: Relations kept per passage (topic links first).
        max_predicate_words: Words of the text between two entities kept as the predicate.
        link_title: Link the passage's topic to each entity it mentions.
        years: Keep four-digit years as entities.
        max_entity_words: Longer capitalised spans are cut to their last this many words.
        initials: Keep an initial and its full stop inside a name ("M. Ward").
        topic_as_name: Name the topic as mentions name it (see above); else the title as written.
        triplets_key: The metadata key the triplets are written to.
    """

    max_relations_per_sentence: int = 1
    max_relations_per_node: int = 8
    max_predicate_words: int = 6
    link_title: bool = True
    years: bool = False
    max_entity_words: int = 6
    initials: bool = True
    topic_as_name: bool = True
    triplets_key: str = TRIPLETS_KEY

    @classmethod
    def class_name(cls) -> str:
        return "CooccurrenceExtractor"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in nodes:
            if given_triplets(node, self.triplets_key) is not None:
                continue
            node.metadata[self.triplets_key] = as_metadata(self.extract_node(node))
            exclude_from_content(node, self.triplets_key)
        return nodes

    def extract_node(self, node: BaseNode, guess_title: bool = True) -> List[Triplet]:
        """The triplets of a node's text (its topic: `metadata["title"]`, else, with `guess_title`, a short
        first line)."""
        return self.extract(node.get_content(metadata_mode=MetadataMode.NONE), _title_of(node, guess_title))

    def topic_of(self, node: BaseNode, guess_title: bool = True) -> Optional[str]:
        """The name `extract_node` links a node's names to (see `topic_as_name`); None if it has none."""
        title = _title_of(node, guess_title)
        return self._named(_heading(node.get_content(MetadataMode.NONE)) if title is None else title)

    def _named(self, title: Optional[str]) -> Optional[str]:
        return (_topic(title) if self.topic_as_name else title.strip()) if title else None

    # entities ------------------------------------------------------------------------------------
    def entities(self, sentence: str) -> List[Tuple[str, int, int]]:
        """The entity spans of one sentence: (name, start, end), in order."""
        tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(sentence)]
        found: List[Tuple[str, int, int]] = []
        i = 0
        while i < len(tokens):
            word = tokens[i][0]
            if not _capitalised(word) or _CJK.search(word):
                if self.years and _YEAR.match(word):
                    found.append((word, tokens[i][1], tokens[i][2]))
                elif _CJK.search(word):
                    found.extend(self._latin_in_cjk(word, tokens[i][1]))
                i += 1
                continue
            j = i + 1  # extend over capitalised words, numbers, and connectors followed by a capital
            while j < len(tokens) and self._joined(sentence, tokens[j - 1], tokens[j]):
                nxt = tokens[j][0]
                if _capitalised(nxt) or nxt.isdigit():
                    j += 1
                    continue
                k = j
                while k < len(tokens) and k - j < 2 and tokens[k][0] in CONNECTORS:
                    k += 1
                if k > j and k < len(tokens) and _capitalised(tokens[k][0]) and all(
                    _JOIN.fullmatch(sentence[tokens[m - 1][2] : tokens[m][1]]) for m in range(j, k + 1)
                ):
                    j = k + 1
                    continue
                break
            opens = i == 0 or bool(_OPENS.search(sentence[tokens[i - 1][2] : tokens[i][1]]))
            initial = j > i + 1 and len(word) == 1 and sentence[tokens[i][2] : tokens[i][2] + 1] == "."
            span = _trimmed(tokens[i:j], opens_sentence=opens and not initial)  # "A. J. Foyt" keeps its "A"
            first = 0  # "In 1990 Smith left" names Smith
            while first < len(span) - 1 and span[first][0].isdigit():
                first += 1
            span = span[first:]
            if len(span) > self.max_entity_words:
                span = span[-self.max_entity_words :]
            if span:
                name = sentence[span[0][1] : span[-1][2]]
                name = re.sub(r"['’]s$", "", name)
                single = len(span) == 1
                if not (single and (name.lower() in _MONTHS or name.lower() in _COMMON or name.isdigit() or len(name) < 2)):
                    if not (single and span[0][1] == tokens[0][1] and name.lower().endswith(("ly", "ing", "ed"))):
                        found.append((name, span[0][1], span[-1][2]))
            i = j
        return found

    def _joined(self, sentence: str, before: Tuple[str, int, int], after: Tuple[str, int, int]) -> bool:
        """Whether two tokens may belong to one name: one or two spaces or a hyphen between them, or, after
        an initial ("Ann B. Davis", "M. Ward"), a full stop and a space."""
        gap = sentence[before[2] : after[1]]
        if _JOIN.fullmatch(gap):
            return True
        initial = len(before[0]) == 1 and before[0].isupper() and gap in (". ", ".")
        return self.initials and initial and after[0].lower() not in _COMMON  # not "World War I. He ..."

    def _latin_in_cjk(self, word: str, offset: int) -> List[Tuple[str, int, int]]:
        return [
            (m.group(), offset + m.start(), offset + m.end())
            for m in re.finditer(r"[A-Z][A-Za-z0-9]+(?: [A-Z][A-Za-z0-9]+)*|(?:1[0-9]{3}|20[0-9]{2})(?=年)", word)
            if self.years or not m.group().isdigit()
        ]

    # relations -----------------------------------------------------------------------------------
    def _predicate(self, between: str, default: str = "with") -> str:
        words = _TOKEN.findall(between)
        n = self.max_predicate_words
        if len(words) > n:
            words = words[: n // 2] + words[-(n - n // 2) :]
        return " ".join(words) or default

    @staticmethod
    def _context(sentence: str, start: int, end: int) -> str:
        """A title link's predicate: the 3 words before the name and the 3 after it ("mentions" if none),
        so that the relation says what the passage says of the name."""
        before = _TOKEN.findall(sentence[max(0, start - 60) : start])[-3:]
        after = _TOKEN.findall(sentence[end : end + 60])[:3]
        return " … ".join(part for part in (" ".join(before), " ".join(after)) if part) or "mentions"

    def extract(self, text: str, title: Optional[str] = None) -> List[Triplet]:
        """The triplets of one passage (its topic is `title`, else a short first line)."""
        if title is None:
            title = _heading(text)
        if title and text.startswith(title):
            body = text[len(title) :]
        else:
            body = text
        topic = self._named(title)
        topic_key = normalize_name(topic) if topic else None
        pairs: List[List[str]] = []
        links: Dict[str, List[str]] = {}
        for start, end in _sentences(body):
            sentence = body[start:end]
            spans = self.entities(sentence) + self._quoted(sentence)
            spans.sort(key=lambda s: s[1])
            keys = [normalize_name(name) for name, _, _ in spans]
            for a, b in self._nearest_pairs(spans, keys):
                (s, _, s_end), (o, o_start, _) = spans[a], spans[b]
                pairs.append([s, self._predicate(sentence[s_end:o_start]), o])
            if topic_key:
                for (name, s_start, _), key in zip(spans, keys):
                    if key != topic_key and key not in links:
                        links[key] = [topic, self._context(sentence, s_start, s_start + len(name)), name]
        linked = list(links.values()) if self.link_title and topic_key else []
        if linked:  # a pair with the topic already states its link
            paired = {normalize_name(p[0] if normalize_name(p[2]) == topic_key else p[2]) for p in pairs
                      if topic_key in (normalize_name(p[0]), normalize_name(p[2]))}
            linked = [t for t in linked if normalize_name(t[2]) not in paired]
        triplets, _ = parse_triplets(linked + pairs)
        return triplets[: self.max_relations_per_node]

    def _nearest_pairs(self, spans: List[Tuple[str, int, int]], keys: List[str]) -> List[Tuple[int, int]]:
        """The entity pairs of one sentence, as indices into `spans` (sorted by start; `keys` are their
        normalized names): nearest first, then leftmost first, at most `max_relations_per_sentence`.

        A pair names two different entities and its object starts after its subject ends. The pairs
        are those of a scan of every gap and every start, found without the scan: for each subject, its
        next object is found by bisection and a skip over runs of one name, and a heap keeps the
        subjects in order of their next pair, so that the cost is O(n log n) and not O(n²) when few
        pairs qualify (a sentence that names one entity a thousand times)."""
        n, limit = len(spans), self.max_relations_per_sentence
        if n < 2 or limit <= 0:
            return []
        starts = [start for _, start, _ in spans]
        other = [n] * n  # other[i]: the first index after i whose name differs from that of i
        for i in range(n - 2, -1, -1):
            other[i] = i + 1 if keys[i + 1] != keys[i] else other[i + 1]

        def partner(a: int, lo: int) -> int:  # the first object at or after `lo` for subject `a`, or n
            lo = max(lo, bisect_left(starts, spans[a][2]))
            return other[lo] if lo < n and keys[lo] == keys[a] else lo

        heap = [(b - a, a, b) for a in range(n - 1) for b in (partner(a, a + 1),) if b < n]
        heapify(heap)
        found: List[Tuple[int, int]] = []
        while heap and len(found) < limit:
            _, a, b = heappop(heap)
            found.append((a, b))
            b = partner(a, b + 1)
            if b < n:
                heappush(heap, (b - a, a, b))
        return found

    def _quoted(self, sentence: str) -> List[Tuple[str, int, int]]:
        if not _CJK.search(sentence):
            return []
        return [
            (next(g for g in m.groups() if g), m.start(), m.end())
            for m in _CJK_QUOTED.finditer(sentence)
            if next(g for g in m.groups() if g).strip()
        ]


# articles trimmed from a name anywhere ("A" is left: "A. J. Foyt")
_ARTICLES = frozenset(("the", "an"))
_OPENING_DROP = _COMMON | CONNECTORS
_INNER_DROP = _ARTICLES | CONNECTORS
# what before a word starts a clause, so that its capital says nothing: "aim: In Paris", 'said, "In', "I. In"
_OPENS = re.compile(r"[.:;!?\"“”(\n]")
_BRACKETS = {")": "(", "）": "（"}


def _trimmed(span: List[Tuple[str, int, int]], opens_sentence: bool = True) -> List[Tuple[str, int, int]]:
    """A name's tokens without trailing connectors and without leading articles ("The Jump" and "the
    Jump" are one name); at the start of a sentence, where every word is capitalised, without any
    leading function word ("However", "In", "Two" in "Two of them")."""
    drop = _OPENING_DROP if opens_sentence else _INNER_DROP
    first, last = 0, len(span)  # cut once: a word at a time, a long run ("The The ...") was quadratic
    while first < last and span[first][0].lower() in drop:
        first += 1
    while last > first and span[last - 1][0].lower() in CONNECTORS:
        last -= 1
    return span[first:last]


def _topic(title: str) -> str:
    """A title as the name its passage is mentioned by elsewhere: without qualifiers in brackets at its
    end ("Mark King (musician)" → "Mark King") and without a leading article ("The Jump" → "Jump", as
    "the Jump" names it too); the title itself when nothing would be left."""
    base = title.strip()
    end = len(base)
    while True:
        shorter = _qualifier_start(base, end)
        if shorter == end or not shorter:
            break
        end = shorter
    base = base[:end]
    tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(base)]
    kept = _trimmed(tokens, opens_sentence=False)
    return base[kept[0][1] : kept[-1][2]] if kept else base


def _qualifier_start(title: str, end: int) -> int:
    """Where `title[:end]` ends without the bracketed group that ends it and the spaces before that group
    ("Foo (bar (baz))" → 3, after "Foo"); `end` if it ends with no such group. An end index, not a
    copy, so that a title of many groups ("A (b) (c) ...") is cut in time linear in its length."""
    if not end or title[end - 1] not in _BRACKETS:
        return end
    depth, closing = 0, title[end - 1]
    for i in range(end - 1, -1, -1):
        if title[i] == closing:
            depth += 1
        elif title[i] == _BRACKETS[closing]:
            depth -= 1
            if depth == 0:
                while i and title[i - 1].isspace():
                    i -= 1
                return i
    return end


def _title_of(node: BaseNode, guess_title: bool) -> Optional[str]:
    """A node's `metadata["title"]`; else None (a title to guess) with `guess_title`, "" (none) without."""
    title = node.metadata.get("title")
    return title if isinstance(title, str) else None if guess_title else ""


def _heading(text: str) -> Optional[str]:
    """A short first line before the text proper ("Title\\ntext"), or None."""
    first, newline, rest = text.partition("\n")
    first = first.strip()
    if not newline or not rest.strip() or not first or len(first) > 120 or first[-1] in ".!?。！？:;,":
        return None
    if len(_TOKEN.findall(first)) > 12:
        return None
    return first
