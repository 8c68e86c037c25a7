"""A case code names the same case on every Python (issue 38 item 4). The code holds only hashes of the case's names
and its seed; what made codes "not offered" on Python 3.12 was the fingerprint cases.json keeps of each validated
script, computed from ``ast.dump``, whose text changes between Python versions. The text it is computed from now
leaves out empty fields: the 151 fingerprints of cases.json came out the same under Python 3.11.7, 3.12.1 and 3.13.0
(checked with each interpreter, December 2026)."""

import ast

from torchdoctor.clinic.practice import _fingerprint, _syntax

SCRIPT = "def f(x):\n    return x  # a comment\n\n\nclass A:\n    pass\n"


def test_the_text_a_fingerprint_hashes_has_no_empty_field():
    assert _syntax(ast.parse(SCRIPT)) == (
        "Module(body=[FunctionDef(name='f', args=arguments(args=[arg(arg='x')]), body=[Return(value=Name(id='x', "
        "ctx=Load()))]), ClassDef(name='A', body=[Pass()])])")


def test_an_empty_field_a_newer_python_adds_changes_no_fingerprint():
    """Python 3.12 gives every function and class a field type_params, empty here: ast.dump's text changes, the
    fingerprint does not."""
    tree = ast.parse(SCRIPT)
    before, dumped = _syntax(tree), ast.dump(tree)
    for node in tree.body:
        if "type_params" not in node._fields:  # Python 3.11: the node gets the field as 3.12 has it
            node.__class__ = type(type(node).__name__, (type(node),), {"_fields": (*node._fields, "type_params")})
            node.type_params = []
            assert ast.dump(tree) != dumped  # what broke the codes
    assert _syntax(tree) == before
    assert _fingerprint(SCRIPT) == _fingerprint(SCRIPT.replace("# a comment", ""))
