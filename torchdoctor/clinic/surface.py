"""Surface variants: the same template under other names, so that a student who met a bug once meets it again in a
script that does not read the same. A variant is a template name with ``~1``, ``~2``... (``digits_mlp~1``): its
scripts are the base template's (clean, buggy, half-fixed) with names renamed, token by token. Only names that are
not attributes, keywords or text are renamed, and never on the lines of a protected region, whose text a fix must
keep as the working script has it; a renamed name must not already be in the script (``rename`` refuses). The gate
validates every variant of a case on its own runs, like a template of its own.
"""

from __future__ import annotations

import io
import keyword
import re
import tokenize

from torchdoctor.clinic.templates import TEMPLATES, ClinicError

__all__ = ["SURFACES", "base_template", "rename", "variant_names", "variant_of"]

# template -> the renamings of its variants 1, 2, ... (variant 0 is the template as written). The two-process DDP
# script has none: each of its runs costs ten times a fast template's.
_SHARED = {"model": "net", "optimizer": "opt", "loss_fn": "criterion", "loader": "train_loader", "x": "xb",
           "y": "yb"}
SURFACES: dict[str, tuple[dict[str, str], ...]] = {
    "digits_mlp": (
        {**_SHARED, "dataset": "train_set", "running": "loss_sum", "steps": "n_steps", "out": "logits",
         "h": "hidden", "MLP": "DigitsMLP"},
        {"model": "mlp", "optimizer": "adam", "loss_fn": "ce_loss", "loader": "batches", "x": "inputs",
         "y": "labels", "epoch": "ep", "predictions": "kept", "MLP": "Net"},
    ),
    "digits_cnn": (
        {**_SHARED, "dataset": "train_set", "running": "epoch_loss", "CNN": "DigitCNN"},
        {"model": "convnet", "optimizer": "adam", "loss_fn": "ce", "loader": "batches", "x": "images",
         "y": "labels", "epoch": "ep", "CNN": "SmallConvNet"},
    ),
    "linear_regression": (
        {**_SHARED, "loss_fn": "mse", "running": "epoch_loss", "Points": "PointsDataset"},
        {"model": "linear", "optimizer": "sgd", "loss_fn": "criterion", "loader": "batches", "x": "features",
         "y": "targets", "epoch": "ep", "path": "ckpt_path", "Points": "Samples"},
    ),
    "text_classifier": (
        {**_SHARED, "x": "batch_tokens", "y": "batch_labels", "running": "epoch_loss", "h": "pooled",
         "BagOfEmbeddings": "MeanEmbeddingClassifier", "Sentences": "SentenceDataset"},
        {"model": "classifier", "optimizer": "adam", "loss_fn": "ce", "loader": "batches", "x": "xb", "y": "yb",
         "epoch": "ep", "BagOfEmbeddings": "EmbeddingBagNet", "Sentences": "TokenData"},
    ),
}
_PROTECTED = re.compile(r"^# --- protected: .*?^# --- end protected ---[^\n]*$", re.M | re.S)


def base_template(name: str) -> str:
    """The template a name is a variant of (itself for a template)."""
    return name.split("~", 1)[0]


def variant_of(name: str) -> int:
    """0 for a template, n for its variant ``~n``; a clear error for a variant that does not exist."""
    base, _, number = name.partition("~")
    if base not in TEMPLATES:
        raise ClinicError(f"unknown template {base!r}; known: {', '.join(TEMPLATES)}")
    if not number:
        return 0
    if not number.isdigit() or not 1 <= int(number) <= len(SURFACES.get(base, ())):
        raise ClinicError(f"template {base!r} has no surface variant {number!r} (it has "
                          f"{len(SURFACES.get(base, ()))})")
    return int(number)


def variant_names(template: str) -> list[str]:
    """A template and its variants: ``["digits_mlp", "digits_mlp~1", "digits_mlp~2"]``."""
    return [template] + [f"{template}~{n}" for n in range(1, len(SURFACES.get(template, ())) + 1)]


def _protected_lines(source: str) -> set[int]:
    lines = set()
    for m in _PROTECTED.finditer(source):
        first = source.count("\n", 0, m.start()) + 1
        lines.update(range(first, first + m.group().count("\n") + 1))
    return lines


def _in_fstring(text: str, names: dict[str, str]) -> str:
    """An f-string's replacement fields with ``names`` renamed (Python 3.11 gives an f-string as one token)."""
    if not re.match(r"(?i)[rb]*f", text):
        return text

    def field(m: re.Match) -> str:
        expression, spec = re.match(r"([^:!]*)(.*)", m.group(1), re.S).groups()
        for old, new in names.items():
            expression = re.sub(rf"(?<![\w.]){re.escape(old)}(?!\w)", new, expression)
        return "{" + expression + spec + "}"

    return re.sub(r"(?<!\{)\{([^{}]*)\}", field, text)


def rename(source: str, template: str) -> str:
    """``source`` (a script of the base template) as variant ``template`` of it; unchanged for variant 0."""
    number = variant_of(template)
    if number == 0:
        return source
    names = SURFACES[base_template(template)][number - 1]
    protected = _protected_lines(source)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    taken = {tok.string for tok in tokens if tok.type == tokenize.NAME} & set(names.values())
    if taken:
        raise ClinicError(f"variant {template}: the script already has the names {sorted(taken)}")
    edits: list[tuple[int, int, int, str]] = []  # (row, start column, end column, new text)
    depth = 0
    for i, tok in enumerate(tokens):
        if tok.type == tokenize.OP:
            depth += tok.string in "([{"
            depth -= tok.string in ")]}"
        if tok.start[0] in protected:
            continue
        if tok.type == tokenize.STRING:
            new = _in_fstring(tok.string, names)
            if new != tok.string:
                if tok.start[0] != tok.end[0]:
                    raise ClinicError(f"variant {template}: a multi-line f-string uses a renamed name")
                edits.append((tok.start[0], tok.start[1], tok.end[1], new))
            continue
        if tok.type != tokenize.NAME or tok.string not in names or keyword.iskeyword(tok.string):
            continue
        before = tokens[i - 1].string if i else ""
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        if before == ".":
            continue  # an attribute: self.out, torch.optim
        if depth and after == "=" and before in ("(", ","):
            raise ClinicError(f"variant {template}: {tok.string!r} is also a keyword argument's name (line "
                              f"{tok.start[0]}); leave it out of the variant")
        edits.append((tok.start[0], tok.start[1], tok.end[1], names[tok.string]))
    lines = source.splitlines(keepends=True)
    for row, start, end, new in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + new + line[end:]
    return "".join(lines)
