"""A graph from raw text with no LLM: the co-occurrence extractor and the transform's extraction hook."""

import logging

from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY, EntityNode, Relation
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode, TransformComponent

from llama_index_graphrag_milvus import CooccurrenceExtractor, GraphRAGRetriever, GraphRAGTransform
from llama_index_graphrag_milvus.examples import bernoulli_documents
from llama_index_graphrag_milvus.schema import passage_id

SENTENCES = (
    "The Journal of Mathematical Physics is a peer-reviewed journal published monthly by the American "
    "Institute of Physics. The current editor is Jan Philip Solovej from University of Copenhagen. "
    "Charles de Gaulle met Ludwig van Beethoven's biographer in Paris, France, with Apollo 11 astronauts."
)


def names(triplets):
    return {n for t in triplets for n in (t.subject, t.object)}


def test_named_entities_are_found_with_their_connectors():
    found = names(CooccurrenceExtractor(link_title=False, max_relations_per_sentence=9).extract(SENTENCES))

    assert {"Journal of Mathematical Physics", "American Institute of Physics", "Jan Philip Solovej",
            "University of Copenhagen", "Charles de Gaulle", "Ludwig van Beethoven", "Paris", "France",
            "Apollo 11"} <= found
    assert not found & {"The", "The Journal of Mathematical Physics", "Beethoven's"}


def test_relations_are_the_words_between_and_bounded_per_sentence_and_passage():
    triplets = CooccurrenceExtractor(link_title=False).extract(SENTENCES)
    assert ("Jan Philip Solovej", "from", "University of Copenhagen") in {
        (t.subject, t.predicate, t.object) for t in triplets
    }
    one = CooccurrenceExtractor(link_title=False, max_relations_per_sentence=1).extract(SENTENCES)
    assert len(one) == 3  # three sentences, one pair each
    assert len(CooccurrenceExtractor(max_relations_per_sentence=5, max_relations_per_node=4).extract(SENTENCES)) == 4
    long = "Alice Smith " + " ".join(["walked"] * 30) + " to Berlin."
    [relation] = CooccurrenceExtractor().extract(long)
    assert len(relation.predicate.split()) <= 6


def test_the_title_is_linked_to_every_entity_of_its_passage():
    text = "Cooper Firearms of Montana\nIt was founded by former employees of Kimber Manufacturing in 1990."
    triplets = CooccurrenceExtractor().extract(text)  # the short first line is the topic
    assert ("Cooper Firearms of Montana", "former employees of … in 1990", "Kimber Manufacturing") in {
        (t.subject, t.predicate, t.object) for t in triplets
    }
    node = TextNode(text="It was founded by Dan Cooper.", metadata={"title": "Cooper Firearms"})
    CooccurrenceExtractor()([node])
    assert node.metadata["triplets"] == [["Cooper Firearms", "was founded by", "Dan Cooper"]]
    assert "triplets" in node.excluded_embed_metadata_keys


def test_initials_stay_inside_names():
    found = names(CooccurrenceExtractor(link_title=False, max_relations_per_sentence=9).extract(
        "The cast includes Tony Randall, Ann B. Davis and Donna Douglas. M. Ward toured with E. B. White."))
    assert {"Ann B. Davis", "M. Ward", "E. B. White"} <= found and not found & {"Ann B", "Davis", "Ward"}
    ended = names(CooccurrenceExtractor(link_title=False).extract("He fought in World War I. He moved to Berlin."))
    assert ended == {"World War I", "Berlin"}  # a capital and a full stop before "He" end a name
    assert names(CooccurrenceExtractor(link_title=False).extract("A. J. Foyt raced Mario Andretti.")) == {
        "A. J. Foyt", "Mario Andretti"}


def test_a_word_capitalised_by_its_place_is_not_part_of_a_name():
    extract = CooccurrenceExtractor(link_title=False, max_relations_per_sentence=9).extract
    for text in ("He fought in World War I. In 1919 Smith left Paris.", "Their aim: In 1919 Smith left Paris.",
                 'He said, "In 1919 Smith left Paris."', "Early career\nIn 1919 Smith left Paris."):
        assert {"Smith", "Paris"} <= names(extract(text)) and not {"In 1919 Smith", "1919 Smith"} & names(extract(text)), text
    # mid-sentence, only an article is trimmed: a number or "St" inside a name stays
    assert names(extract("It was sold by Two Dollar Radio near St Paul's Cathedral.")) == {
        "Two Dollar Radio", "St Paul's Cathedral"}


def test_a_title_is_named_as_other_passages_mention_it():
    """A qualifier in brackets and a leading article are not how other passages name a topic ("the Jump"
    loses its article as a mention), so the hop can reach it by name."""
    extractor = CooccurrenceExtractor()
    scaredy = extractor.extract("Scaredy Squirrel (TV series)\nIt airs on YTV in Canada.")
    assert "Scaredy Squirrel" in {t.subject for t in scaredy} and "Scaredy Squirrel (TV series)" not in names(scaredy)
    mention = extractor.extract("Terry McGurrin\nHe was story editor for Scaredy Squirrel on YTV.")
    assert "Scaredy Squirrel" in names(mention)
    press, novel = extractor.extract("Two Dollar Radio\nIt was founded in Columbus in 2005."), extractor.extract(
        "Grace Krilanovich\nHer novel was published by Two Dollar Radio in 2010.")
    assert {t.subject for t in press} & names(novel) == {"Two Dollar Radio"}  # a number inside a name stays
    the_jump = extractor.extract("The Jump\nIt follows celebrities on Channel 4.")
    assert "Jump" in {t.subject for t in the_jump} and "The Jump" not in names(the_jump)
    assert "東京" in {t.subject for t in extractor.extract("東京（曲）\n「東京」は日本の歌。Tokyo Records より発売。")}
    nested = extractor.extract("Mercury (planet (Roman god))\nMercury orbits the Sun.")
    assert "Mercury" in {t.subject for t in nested} and not any("(" in n for n in names(nested))
    as_written = CooccurrenceExtractor(topic_as_name=False).extract("The Jump\nIt follows celebrities on Channel 4.")
    assert "The Jump" in {t.subject for t in as_written}


def test_chinese_text_does_not_crash_and_keeps_quoted_and_latin_names():
    text = "莱昂哈德·欧拉是瑞士数学家。他在《无穷小分析引论》中写道，Euler 在 Berlin 工作。没有名字的句子！"
    found = names(CooccurrenceExtractor(max_relations_per_sentence=3).extract(text))
    assert {"无穷小分析引论", "Euler", "Berlin"} <= found
    assert CooccurrenceExtractor().extract("") == [] and CooccurrenceExtractor().extract("。。！") == []


def test_no_llm_and_no_triplets_builds_a_graph_and_says_so_once(make_store, caplog):
    store = make_store()
    nodes = [TextNode(id_=d.id_, text=d.text) for d in bernoulli_documents()]
    with caplog.at_level(logging.INFO, logger="llama_index_graphrag_milvus.transform"):
        transform = GraphRAGTransform(store=store)
        transform(nodes)
    records = [r for r in caplog.records if r.name.endswith("transform")]
    assert len(records) == 1 and records[0].levelno == logging.INFO  # the default, finding plenty: no warning
    assert "5 of 5 nodes carry no triplets" in records[0].getMessage()
    assert "CooccurrenceExtractor" in records[0].getMessage()
    assert store.count()["relations"] > 0
    assert transform.built["CooccurrenceExtractor"]["passages"] == 5
    assert all(n.metadata["triplets"] for n in nodes)

    explanation = GraphRAGRetriever(store=store, similarity_top_k=2).explain("Who taught Leonhard Euler?")
    text = str(explanation)  # extracted relations print as given ones do: subject —[predicate]→ object
    assert "Leonhard Euler" in text and "—[" in text and "via " in text


def test_a_users_extractor_is_used_for_nodes_without_triplets(make_store):
    class KGLike(TransformComponent):
        """Leaves LlamaIndex KG output, as SimpleLLMPathExtractor does."""

        def __call__(self, nodes, **kwargs):
            for node in nodes:
                node.metadata[KG_NODES_KEY] = [EntityNode(name="Acme"), EntityNode(name="Rockets")]
                node.metadata[KG_RELATIONS_KEY] = [Relation(label="builds", source_id="Acme", target_id="Rockets")]
            return nodes

    store = make_store()
    given = TextNode(id_="g", text="Given passage.", metadata={"triplets": [["Globex", "sells", "Widgets"]]})
    plain = TextNode(id_="p", text="Acme builds rockets in Texas.")
    transform = GraphRAGTransform(store=store, extractor=KGLike())
    transform([given, plain])
    assert plain.metadata["triplets"] == [["Acme", "builds", "Rockets"]]
    assert given.metadata["triplets"] == [["Globex", "sells", "Widgets"]]  # not passed to the extractor
    # and the text's own link "Acme —[builds rockets in]→ Texas"
    assert store.count() == {"entities": 5, "relations": 3, "passages": 2}
    assert transform.built == {"given triplets": {"passages": 1, "triplets": 1}, "KGLike": {"passages": 1, "triplets": 1},
                               "text links": {"passages": 1, "triplets": 1}}


def test_given_triplets_are_kept_whole_and_the_texts_own_links_join_them(make_store, caplog):
    store = make_store()
    documents = bernoulli_documents()
    with caplog.at_level(logging.WARNING, logger="llama_index_graphrag_milvus.transform"):
        transform = GraphRAGTransform(store=store)
        transform(documents)
    assert not [r for r in caplog.records if r.name.endswith("transform")]  # nothing was missing
    # 24 links of the texts, and 3 of the titles to names only the triplets state (Euler's analysis and
    # graph theory, Basel's 1460): every name of a passage is linked to its title, as in the text's graph
    assert transform.built == {"given triplets": {"passages": 5, "triplets": 22},
                               "text links": {"passages": 5, "triplets": 27}}
    assert store.count()["relations"] == 22 + 27
    daniel = documents[2]
    given = bernoulli_documents()[2].metadata["triplets"]  # as the example gives them
    (relations,) = store.backend.passage_relations([passage_id(daniel.id_, daniel.text)]).values()
    stated = {(t.subject, t.predicate, t.object) for t in store.describe(sorted(relations)).values()}
    assert {tuple(t) for t in given} < stated  # every given triplet, and the text's links beside them:
    assert {("Daniel Bernoulli", "the son of", "Johann Bernoulli"), ("Hydrodynamica", "he stated", "Bernoulli"),
            ("Daniel Bernoulli", "including the St … paradox", "Petersburg")} < stated  # its title to the names
    assert len(stated) == 5 + 5
    assert daniel.metadata["triplets"] == given  # the node's metadata is left as given


def test_text_links_false_writes_the_given_triplets_alone(make_store):
    store = make_store()
    transform = GraphRAGTransform(store=store, text_links=False)
    transform(bernoulli_documents())
    assert store.count() == {"entities": 21, "relations": 22, "passages": 5}
    assert set(transform.built) == {"given triplets"}
    GraphRAGTransform(store=store)(bernoulli_documents())  # the same passages again, now with their text's links
    assert store.count() == {"entities": 27, "relations": 49, "passages": 5}
    GraphRAGTransform(store=store)(bernoulli_documents())  # idempotent
    assert store.count() == {"entities": 27, "relations": 49, "passages": 5}


async def test_async_ingest_extracts_too(make_store):
    store = make_store()
    await GraphRAGTransform(store=store).acall([TextNode(id_="a", text="Alice Smith moved to Berlin.")])
    assert store.count()["relations"] == 1


def test_text_links_follow_the_transforms_own_extractor_so_a_second_ingest_changes_nothing(make_store):
    store = make_store()
    nodes = [TextNode(id_=d.id_, text=d.text, metadata={"title": d.metadata["title"]}) for d in bernoulli_documents()]
    transform = GraphRAGTransform(store=store, extractor=CooccurrenceExtractor(link_title=False, max_relations_per_node=2))
    transform(nodes)  # the extractor's triplets now sit in the nodes' metadata, as given ones
    first = store.count()
    transform(nodes)  # so the text links are the same extractor's, which state nothing new
    assert store.count() == first == {"entities": 10, "relations": 6, "passages": 5}


def test_text_links_of_a_chunk_take_its_title_from_its_metadata_and_guess_none():
    from llama_index_graphrag_milvus.ingest.extract.cooccurrence import with_text_links

    text = "Royal Society, where Isaac Newton\npresided, heard Edmond Halley speak in London."
    chunk = TextNode(text=text, relationships={NodeRelationship.PREVIOUS: RelatedNodeInfo(node_id="before")})
    titled = TextNode(text=text, metadata={"title": "Royal Society"}, relationships=dict(chunk.relationships))
    _, (untitled_links, titled_links) = with_text_links([chunk, titled], [[], []])
    assert "Royal Society, where Isaac Newton" not in names(untitled_links)  # a wrapped line, not a title
    assert {t.subject for t in titled_links} >= {"Royal Society"}  # the title links its passage's names
    assert names(untitled_links) <= names(titled_links)


ARMSTRONG = "Neil Armstrong\nHe commanded Apollo 11, which landed on the Moon with Buzz Aldrin."
#: An LLM's triplets on the facts of other names: none names the passage's title.
ARMSTRONG_TRIPLETS = [["Apollo 11", "landed on", "Moon"], ["Apollo 11", "launched in", "1969"],
                      ["Buzz Aldrin", "flew on", "Apollo 11"], ["Apollo 11", "was", "crewed spaceflight"]]


def test_given_triplets_add_to_the_texts_graph_and_keep_a_passage_about_its_title():
    from llama_index_graphrag_milvus.ingest.extract.cooccurrence import with_text_links
    from llama_index_graphrag_milvus.schema import parse_triplets

    document = TextNode(text=ARMSTRONG)  # a whole document: its heading line is its title, as without triplets
    given, _ = parse_triplets(ARMSTRONG_TRIPLETS)
    (linked,), _ = with_text_links([document], [given])
    alone = CooccurrenceExtractor().extract_node(TextNode(text=ARMSTRONG))
    assert {t.id for t in alone} <= {t.id for t in linked}  # the text's graph, whole
    assert {t.id for t in given} <= {t.id for t in linked}
    about = [t for t in linked if "Neil Armstrong" in (t.subject, t.object)]
    assert len(about) >= len(linked) / 2  # the passage is about its title (the hop and topic rankings)
    assert names(about) == names(given) | {"Neil Armstrong"}  # each name is linked to it, 1969 too
    assert ("Neil Armstrong", "mentions", "1969") in {(t.subject, t.predicate, t.object) for t in linked}


def test_a_passage_whose_triplets_name_other_things_is_still_reached_by_its_title(make_store):
    store = make_store()
    nodes = [
        TextNode(id_="ohio", text="Wapakoneta\nWapakoneta is a city in Ohio, where Neil Armstrong was born."),
        TextNode(id_="armstrong", text=ARMSTRONG, metadata={"triplets": ARMSTRONG_TRIPLETS}),
    ]
    GraphRAGTransform(store=store)(nodes)
    ohio, armstrong = (passage_id(n.node_id, n.text) for n in nodes)
    assert store.linked_passages(ohio) == [armstrong]  # the hop from the town to the man
