"""The shared Wikidata subset: loading, types/aliases/descriptions, indexes, the KnowledgeSource protocol."""

from __future__ import annotations

import gzip
import re

import pytest

from cresowlve_core.sources.kg import KnowledgeGraph, KnowledgeSource, load_kg, split_aliases


def test_shipped_subset_loads_with_types_aliases_and_indexes():
    kg = load_kg()
    assert len(kg.triples) > 80_000 and len(set(kg.triples)) == len(kg.triples)
    assert isinstance(kg, KnowledgeSource)
    assert kg.english_label("Q100") == "Boston" and "Beantown" in kg.aliases_of("Q100")
    assert kg.description_of("Q100").startswith("city in and state capital of Massachusetts")
    assert "Q5" in kg.types_of("Q109847")  # Günther Wilke is a human
    humans = kg.entities_of_types(["Q5"])
    assert len(humans) > 10_000 and humans == sorted(humans)
    # subjects-by-(relation, object) agrees with a scan of the triples
    p, o = "P463", "Q414188"
    assert kg.subjects_with(p, o) == sorted(s for s, pp, oo in kg.triples if (pp, oo) == (p, o))
    assert kg.n_subjects_with(p, o) == len(kg.subjects_with(p, o)) > 1
    # degrees agree with the triples
    q = "Q109847"
    assert kg.out_degree[q] == sum(s == q for s, _, _ in kg.triples)
    assert kg.in_degree[q] == sum(o == q for _, _, o in kg.triples)
    assert kg.degree[q] == kg.in_degree[q] + kg.out_degree[q]


def test_create_api_still_works():
    kg = load_kg()
    assert kg.label("P166") == "award received" and kg.has_label("Q100")
    s, p, o = kg.triples[0]
    assert kg.has(s, p, o) and (p, o) in kg.out_edges[s] and (s, o) in kg.by_relation[p]


def _tiny() -> KnowledgeGraph:
    triples = [("A", "P1", "X"), ("A", "P1", "Y"), ("B", "P1", "X"), ("C", "P2", "A")]
    return KnowledgeGraph(triples, labels={"A": "Alpha"}, aliases={"A": ["Al"]},
                          types={"A": frozenset({"T"}), "B": frozenset({"T", "U"})})


def test_indexes_on_a_tiny_graph():
    kg = _tiny()
    assert kg.subjects_with("P1", "X") == ["A", "B"] and kg.subjects_with("P9", "X") == []
    assert kg.subjects_with_all([("P1", "X"), ("P1", "Y")]) == ["A"]
    assert kg.in_degree["A"] == 1 and kg.out_degree["A"] == 2 and kg.degree["A"] == 3
    assert kg.entities_of_types(["U"]) == ["B"] and kg.entities_of_types(["T"]) == ["A", "B"]
    assert kg.english_label("B") is None and kg.label("B") == "B"
    assert kg.notability("A") == 3
    kg.notability_measure = "in_degree"
    assert kg.notability("A") == 1
    with pytest.raises(ValueError):
        kg.subjects_with_all([])


def test_loader_reads_gzipped_tables_and_splits_aliases(tmp_path):
    root = tmp_path / "kg"
    (root / "LitWD1K").mkdir(parents=True)
    (root / "Entities").mkdir()
    (root / "LitWD1K" / "train.txt").write_text("Q1\tP1\tQ2\nQ3\tP1\tQ2\n")
    (root / "Entities" / "entity_labels_en.txt").write_text("Q1\tOne\n")
    with gzip.open(root / "Entities" / "entity_types.txt.gz", "wt") as f:
        f.write("Q1\tQ5\nQ1\tQ6\n")
    with gzip.open(root / "Entities" / "entity_aliases_en.txt.gz", "wt") as f:
        f.write("Q1\tUno, Eins, Uno\n")
    kg = load_kg(root)
    assert len(kg.triples) == 2 and kg.types_of("Q1") == frozenset({"Q5", "Q6"})
    assert kg.aliases_of("Q1") == ["Uno", "Eins"]
    assert split_aliases("Boston, MA, Beantown") == ["Boston", "MA", "Beantown"]


def test_loader_without_triples_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no triples"):
        load_kg(tmp_path)


def _graph_dir(root, triples: bytes, labels: bytes):
    (root / "LitWD1K").mkdir(parents=True)
    (root / "Entities").mkdir()
    (root / "LitWD1K" / "train.txt").write_bytes(triples)
    (root / "Entities" / "entity_labels_en.txt").write_bytes(labels)
    return root


def test_a_byte_order_mark_is_not_read_as_part_of_the_first_qid(tmp_path):
    # it used to make an entity '\ufeffQ1' beside Q1: Q1 lost its triple, or its label
    bom = b"\xef\xbb\xbf"
    kg = load_kg(_graph_dir(tmp_path / "kg", bom + b"Q1\tP1\tQ2\n", bom + b"Q1\tOne\r\nQ2\tTwo\r\n"))
    assert kg.entities == ["Q1", "Q2"] and kg.labels == {"Q1": "One", "Q2": "Two"}


@pytest.mark.parametrize("gz", [False, True])
def test_a_graph_file_that_is_not_utf8_is_one_error_naming_its_line(tmp_path, gz):
    from cresowlve_core.sources.kg import KnowledgeGraphError

    root = _graph_dir(tmp_path / "kg", b"Q1\tP1\tQ2\n", b"")
    labels = root / "Entities" / "entity_labels_en.txt"
    labels.unlink()
    bad = b"Q1\tOne\nQ2\tT\xffo\n"
    if gz:
        labels = labels.with_name(labels.name + ".gz")
        bad = gzip.compress(bad)
    labels.write_bytes(bad)
    with pytest.raises(KnowledgeGraphError) as err:  # a UnicodeDecodeError and a traceback before
        load_kg(root)
    assert str(err.value) == f"{labels}:2: not UTF-8 (byte 0xff); save the file as UTF-8"


@pytest.mark.parametrize("damage", ["truncated", "not-gzip", "corrupt"])
def test_a_damaged_gzip_table_is_one_error_naming_the_file(tmp_path, damage):
    # a truncated download of entity_types.txt.gz ended `cresowlve synth` with a traceback and "bug: ..." (exit 1)
    from cresowlve_core.sources.kg import KnowledgeGraphError

    root = _graph_dir(tmp_path / "kg", b"Q1\tP1\tQ2\n", b"Q1\tOne\n")
    whole = gzip.compress(b"".join(b"Q%d\tQ5\n" % i for i in range(2000)))
    data = {"truncated": whole[: len(whole) // 2], "not-gzip": b"Q1\tQ5\n",
            "corrupt": whole[:20] + bytes(b ^ 0xFF for b in whole[20:40]) + whole[40:]}[damage]
    table = root / "Entities" / "entity_types.txt.gz"
    table.write_bytes(data)
    with pytest.raises(KnowledgeGraphError, match=rf"^{re.escape(str(table))}: not a readable gzip file \(.+\); copy or download it again$"):
        load_kg(root)



@pytest.mark.parametrize("line", [
    b"\xef\xbb\xbfQ3\tP1\tQ2",  # a second file's byte-order mark (cat a.txt b.txt): entity '\ufeffQ3' beside Q3
    b"Q4\tQ5\tP31",  # columns out of order
    b'Q6\tP569\t"1952-03-11"^^xsd:date',  # a literal triple, no entity
], ids=["inner-bom", "swapped", "literal"])
def test_a_triple_line_that_is_not_qid_pid_qid_is_one_error_naming_its_line(tmp_path, line):
    # each was read as a triple of the graph: the docstring promised "QID PID QID", only the count was checked
    from cresowlve_core.sources.kg import KnowledgeGraphError

    root = _graph_dir(tmp_path / "kg", b"Q1\tP1\tQ2\n" + line + b"\n", b"Q1\tOne\n")
    with pytest.raises(KnowledgeGraphError, match=r"train\.txt:2: expected a triple QID PID QID, got "):
        load_kg(root)


def test_a_table_key_that_is_not_an_id_is_one_error_naming_its_line(tmp_path):
    # a second labels file joined with its byte-order mark keyed 'One' under '\ufeffQ1': Q1 had no label
    from cresowlve_core.sources.kg import KnowledgeGraphError

    root = _graph_dir(tmp_path / "kg", b"Q1\tP1\tQ2\n", b"Q2\tTwo\n\xef\xbb\xbfQ1\tOne\n")
    with pytest.raises(KnowledgeGraphError, match=r"entity_labels_en\.txt:2: expected a QID or PID before the tab, got '\\ufeffQ1'"):
        load_kg(root)
