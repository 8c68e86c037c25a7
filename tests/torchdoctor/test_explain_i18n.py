"""The translation templates of the catalog's message-specific fixes (torchdoctor.explain_i18n)."""

import re

from torchdoctor.catalog import CATALOG
from torchdoctor.explain_i18n import specific_template


def test_every_specific_fix_template_gives_back_the_english_fix():
    """A template filled with a message's groups is the English specific fix, braces of the fix itself included
    (cuda-checkpoint-on-cpu writes a dict: map_location={'cuda:1': 'cuda:0'}); a fix that cannot be a template is
    None, never a template that fails to format."""
    for entry in CATALOG:
        if entry.specific_fix is None:
            continue
        groups = {name: str(7 + i) for i, name in enumerate(entry.regex.groupindex)}
        template = specific_template(entry)
        if template is None:
            continue
        assert template.format(**groups) == entry.specific_fix(groups), entry.id
        assert set(re.findall(r"(?<!\{)\{(\w+)\}(?!\})", template)) <= set(groups), entry.id


def test_a_fix_with_literal_braces_is_a_template():
    entry = next(e for e in CATALOG if e.id == "cuda-checkpoint-on-cpu")
    template = specific_template(entry)
    assert template is not None and "{{'cuda:{index}': 'cuda:0'}}" in template
    assert "{'cuda:1': 'cuda:0'}" in template.format(index="1", count="1")
