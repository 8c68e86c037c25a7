"""Bug operators: exact, anchored edits of a template's source, each with its label, chapter and oracle."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from torchdoctor.clinic.templates import TEMPLATES, ClinicError, template_source

__all__ = ["ORACLES", "ClinicError", "Edit", "Operator", "OPERATORS", "apply_operator", "case_templates",
           "get_operator", "revert"]

# What an oracle checks, in the run's report (torchdoctor/clinic/oracles.py decides it).
ORACLES = {
    "error": "the script raises an error that explain() files under the operator's label",
    "frozen": "some parameter of the trained model never changes",
    "nonfinite": "a loss passed to backward() is NaN or infinite",
    "initial-loss": "the first loss is far from ln C (more than 25%)",
    "memory": "the memory in use grows with the steps (more than 0.5 MB from the first quarter of the run to its end)",
    "accuracy": "the grader's score on its own held-out data falls below the clean runs' spread over seeds",
}


@dataclass(frozen=True)
class Edit:
    """Replace ``anchor`` (found exactly once in the template) by ``replacement`` (then found exactly once)."""

    anchor: str
    replacement: str


@dataclass(frozen=True)
class Operator:
    id: str
    label: str  # a catalog id of torchdoctor.explain for errors, a named silent bug otherwise
    chapter: str  # the slug of the chapter that teaches it (course.toml)
    oracle: str  # a key of ORACLES
    description: str
    edits: dict[str, Edit] = field(default_factory=dict)  # template name -> its edit
    accepts_lr: tuple[float, float] | None = None  # a learning-rate bug: the learning rates a fix may use

    @property
    def templates(self) -> tuple[str, ...]:
        return tuple(self.edits)


def _op(id, label, chapter, oracle, description, **edits):  # noqa: A002
    return Operator(id, label, chapter, oracle, description, {t: Edit(*e) for t, e in edits.items()})


# The learning rates a fix of the linear regression's learning-rate bug may use: each end passes every oracle on the
# gate's seeds (wrong_fixes.py, right fixes), so any rate in between is a right value, not only the original 0.05.
LEARNING_RATES = (0.01, 0.5)
_ZERO_GRAD = ("optimizer.zero_grad()\n            loss = loss_fn(model(x), y)", "loss = loss_fn(model(x), y)")
_SHUFFLE = ("shuffle=True)", "shuffle=False)")

OPERATORS: tuple[Operator, ...] = (
    # Dimensions and shapes
    _op("first-layer-width", "mat1-mat2-shapes", "dimensions", "error",
        "the first layer expects 32 features, the data has 64",
        digits_mlp=("self.fc1 = nn.Linear(64, 128)", "self.fc1 = nn.Linear(32, 128)")),
    _op("flatten-size", "mat1-mat2-shapes", "dimensions", "error",
        "the classifier's input size is computed for 4x4 maps; two poolings leave 2x2",
        digits_cnn=("self.fc = nn.Linear(16 * 2 * 2, 10)", "self.fc = nn.Linear(16 * 4 * 4, 10)")),
    _op("missing-channel-dim", "conv-input-dims", "dimensions", "error",
        "images passed as flat rows of 64 pixels, without the channel and spatial dimensions",
        digits_cnn=("dtype=torch.float32).view(-1, 1, 8, 8)", "dtype=torch.float32)")),
    _op("conv-in-channels", "conv-channels", "dimensions", "error",
        "the first convolution expects RGB images; the digits are grey",
        digits_cnn=("nn.Conv2d(1, 8, kernel_size=3, padding=1)", "nn.Conv2d(3, 8, kernel_size=3, padding=1)")),
    _op("pool-over-batch", "ce-batch-size", "dimensions", "error",
        "the embeddings are averaged over the batch instead of over the tokens",
        text_classifier=("self.embed(tokens).mean(dim=1)", "self.embed(tokens).mean(dim=0)")),
    _op("vocab-too-small", "embedding-index", "dimensions", "error",
        "the embedding table has fewer rows than the vocabulary has tokens",
        text_classifier=("self.embed = nn.Embedding(vocab_size, 16)",
                         "self.embed = nn.Embedding(vocab_size - 10, 16)")),
    _op("labels-one-based", "ce-target-out-of-bounds", "dimensions", "error",
        "labels shifted to 1..10 for 10 classes",
        digits_mlp=("torch.tensor(y_train, dtype=torch.long))", "torch.tensor(y_train + 1, dtype=torch.long))")),
    _op("target-column", "mse-broadcast-warning", "dimensions", "accuracy",
        "targets of shape (N,) against predictions of shape (N, 1): MSELoss broadcasts them to (N, N), with a warning",
        linear_regression=("self.y = torch.tensor(y, dtype=torch.float32).unsqueeze(1)",
                           "self.y = torch.tensor(y, dtype=torch.float32)")),
    # Gradients and autograd
    _op("detach-hidden", "detached-graph", "gradients", "frozen",
        "a .detach() in the middle of the network: the layers before it never learn",
        digits_mlp=("h = torch.relu(self.fc2(h))", "h = torch.relu(self.fc2(h)).detach()")),
    _op("optimizer-head-only", "parameters-not-in-optimizer", "gradients", "frozen",
        "the optimiser is given the output layer's parameters only",
        digits_mlp=("torch.optim.Adam(model.parameters(), lr=2e-3)",
                    "torch.optim.Adam(model.out.parameters(), lr=2e-3)"),
        text_classifier=("torch.optim.Adam(model.parameters(), lr=1e-2)",
                         "torch.optim.Adam(model.out.parameters(), lr=1e-2)")),
    _op("frozen-convolution", "requires-grad-off", "gradients", "frozen",
        "the first convolution is frozen (requires_grad=False) and never unfrozen",
        digits_cnn=("    model = build_model()\n",
                    "    model = build_model()\n    model.conv1.requires_grad_(False)\n")),
    _op("backward-twice", "backward-twice", "gradients", "error",
        "backward() called a second time on the same graph",
        digits_mlp=("            loss.backward()\n", "            loss.backward()\n            loss.backward()\n")),
    _op("unreduced-loss", "non-scalar-backward", "gradients", "error",
        "the loss keeps one value per example (reduction='none') and backward() is called on it",
        digits_mlp=("loss_fn = nn.CrossEntropyLoss()", "loss_fn = nn.CrossEntropyLoss(reduction=\"none\")")),
    _op("forward-under-no-grad", "no-grad-fn", "gradients", "error",
        "the forward pass runs under torch.no_grad()",
        linear_regression=("            loss = loss_fn(model(x), y)\n",
                           "            with torch.no_grad():\n                loss = loss_fn(model(x), y)\n")),
    # Memory
    _op("loss-sum-keeps-graph", "graph-kept-alive", "memory", "memory",
        "the running loss adds the loss tensor, not its value: every step's graph stays alive",
        digits_mlp=("running += loss.item()", "running += loss")),
    _op("outputs-kept-with-graph", "graph-kept-alive", "memory", "memory",
        "the outputs kept for a confusion matrix, not their argmax: each one holds its step's graph",
        digits_mlp=("predictions.append(out.argmax(dim=1))", "predictions.append(out)")),
    # Dtypes and devices
    _op("float64-inputs", "matmul-dtype", "dtype-device", "error",
        "inputs left in NumPy's float64",
        digits_mlp=("return torch.tensor((X - mean) / std, dtype=torch.float32)",
                    "return torch.tensor((X - mean) / std)")),
    _op("float-labels", "ce-target-dtype", "dtype-device", "error",
        "class labels converted to float",
        digits_mlp=("torch.tensor(y_train, dtype=torch.long))", "torch.tensor(y_train, dtype=torch.float32))")),
    _op("float-tokens", "embedding-index-dtype", "dtype-device", "error",
        "token ids converted to float",
        text_classifier=("return torch.tensor(self.tokens[i], dtype=torch.long)",
                         "return torch.tensor(self.tokens[i], dtype=torch.float32)")),
    # Saving and loading
    _op("pickled-model", "weights-only-load", "checkpoints", "error",
        "the whole model object saved instead of its state_dict, then loaded with weights_only=True",
        digits_mlp=('torch.save({"model": model.state_dict(), "epochs": EPOCHS}, path)',
                    'torch.save({"model": model, "epochs": EPOCHS}, path)')),
    _op("load-whole-checkpoint", "state-dict-keys", "checkpoints", "error",
        "the checkpoint dictionary passed to load_state_dict instead of its 'model' entry",
        digits_mlp=('restored.load_state_dict(torch.load(path, weights_only=True)["model"])',
                    "restored.load_state_dict(torch.load(path, weights_only=True))")),
    _op("restore-other-vocab", "state-dict-size-mismatch", "checkpoints", "error",
        "the model is rebuilt with a vocabulary of another size before loading",
        text_classifier=("    restored = build_model()\n", "    restored = build_model(vocab_size=VOCAB + 2)\n")),
    # Data loading
    _op("ragged-sentences", "collate-unequal-sizes", "data-loading", "error",
        "sentences cut to random lengths without padding",
        text_classifier=("return torch.tensor(self.tokens[i], dtype=torch.long)",
                         "return torch.tensor(self.tokens[i][: LENGTH - i % 3], dtype=torch.long)")),
    _op("dataset-returns-none", "collate-none", "data-loading", "error",
        "__getitem__ returns None for some items (a skipped example)",
        text_classifier=("    def __getitem__(self, i):\n",
                         "    def __getitem__(self, i):\n        if i % 97 == 0:\n            return None\n")),
    _op("features-as-labels", "features-as-labels", "case-study", "accuracy",
        "the Dataset returns the features as the labels",
        linear_regression=("return self.X[i], self.y[i]", "return self.X[i], self.X[i]")),
    _op("labels-misaligned", "labels-misaligned", "data-loading", "accuracy",
        "the labels are rolled by one position against their images",
        digits_mlp=("torch.tensor(y_train, dtype=torch.long))",
                    "torch.tensor(np.roll(y_train, 1), dtype=torch.long))")),
    _op("no-shuffle", "shuffle-off", "data-loading", "accuracy",
        "shuffle=False (the data was shuffled once already by the split)",
        digits_mlp=_SHUFFLE, digits_cnn=_SHUFFLE, text_classifier=_SHUFFLE),
    # Convergence
    _op("no-zero-grad", "no-zero-grad", "convergence", "accuracy",
        "optimizer.zero_grad() left out: gradients add up over the steps",
        digits_mlp=("optimizer.zero_grad()\n            out = model(x)", "out = model(x)"),
        digits_cnn=_ZERO_GRAD, linear_regression=_ZERO_GRAD, text_classifier=_ZERO_GRAD),
    replace(_op("learning-rate-too-high", "learning-rate-too-high", "convergence", "nonfinite",
                "a learning rate 100 times too high for plain SGD",
                linear_regression=("torch.optim.SGD(model.parameters(), lr=0.05)",
                                   "torch.optim.SGD(model.parameters(), lr=5.0)")),
            accepts_lr=LEARNING_RATES),
    _op("softmax-before-loss", "softmax-before-loss", "convergence", "accuracy",
        "the model returns probabilities and CrossEntropyLoss applies its own softmax on top",
        digits_mlp=("return self.out(self.drop(h))", "return torch.softmax(self.out(self.drop(h)), dim=1)")),
    _op("large-init", "init-scale", "convergence", "initial-loss",
        "the output layer initialised with a standard deviation of 5",
        text_classifier=("        self.out = nn.Linear(16, NUM_CLASSES)\n",
                         "        self.out = nn.Linear(16, NUM_CLASSES)\n"
                         "        nn.init.normal_(self.out.weight, std=5.0)\n"),
        digits_mlp=("        self.out = nn.Linear(64, 10)\n",
                    "        self.out = nn.Linear(64, 10)\n        nn.init.normal_(self.out.weight, std=5.0)\n")),
    # Accuracy
    _op("no-eval", "missing-eval", "accuracy", "accuracy",
        "predict() does not call model.eval(): dropout stays on while predicting",
        digits_mlp=("    model.eval()\n    with torch.no_grad():\n        return model(prepare(X))",
                    "    with torch.no_grad():\n        return model(prepare(X))")),
    _op("test-own-statistics", "test-own-statistics", "accuracy", "accuracy",
        "predict() normalises new data with its own mean and standard deviation, not the training set's",
        digits_mlp=("return model(prepare(X)).argmax(dim=1)",
                    "return model(torch.tensor((X - X.mean()) / X.std(), dtype=torch.float32)).argmax(dim=1)")),
    _op("argmax-over-batch", "argmax-wrong-dim", "accuracy", "accuracy",
        "predictions taken with argmax over the batch dimension",
        digits_cnn=("return model(prepare(X)).argmax(dim=1)", "return model(prepare(X)).argmax(dim=0)")),
    _op("train-on-few", "too-little-data", "accuracy", "accuracy",
        "the training set is cut to its first 100 examples while experimenting, and left so",
        digits_cnn=("dataset = TensorDataset(prepare(X_train), torch.tensor(y_train, dtype=torch.long))",
                    "dataset = TensorDataset(prepare(X_train[:100]), torch.tensor(y_train[:100], dtype=torch.long))")),
    # Multiple GPUs and processes
    _op("no-process-group", "ddp-no-process-group", "multi-gpu", "error",
        "DistributedDataParallel without init_process_group",
        ddp_digits=('    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)\n'
                    "    torch.manual_seed(SEED)\n",
                    "    torch.manual_seed(SEED)\n")),
    _op("device-ids-on-cpu", "ddp-device-ids-cpu", "multi-gpu", "error",
        "device_ids=[rank] given for a CPU model",
        ddp_digits=("model = DDP(build_model())", "model = DDP(build_model(), device_ids=[rank])")),
    _op("process-group-twice", "process-group-twice", "multi-gpu", "error",
        "the process group initialised a second time",
        ddp_digits=('    torch.manual_seed(SEED)\n',
                    '    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)\n'
                    '    torch.manual_seed(SEED)\n')),
    _op("unused-parameter", "ddp-unused-parameters", "multi-gpu", "error",
        "a layer defined in the model but not used in forward()",
        ddp_digits=("        self.out = nn.Linear(64, 10)\n",
                    "        self.out = nn.Linear(64, 10)\n        self.extra = nn.Linear(64, 10)\n")),
    _op("no-distributed-sampler", "no-distributed-sampler", "multi-gpu", "accuracy",
        "no DistributedSampler: both ranks train on all the data",
        ddp_digits=("loader = DataLoader(dataset, batch_size=32, sampler=sampler)",
                    "loader = DataLoader(dataset, batch_size=32, shuffle=True)")),
)


def get_operator(operator_id: str) -> Operator:
    for op in OPERATORS:
        if op.id == operator_id:
            return op
    raise ClinicError(f"unknown operator {operator_id!r}; known: {', '.join(o.id for o in OPERATORS)}")


def case_templates(op: Operator) -> list[str]:
    """The templates a case of this operator may use: each of its templates and their surface variants."""
    from torchdoctor.clinic.surface import variant_names

    return [name for t in op.templates for name in variant_names(t)]


def _edit(op: Operator, template: str) -> Edit:
    if template not in TEMPLATES:
        raise ClinicError(f"unknown template {template!r}; known: {', '.join(TEMPLATES)}")
    if template not in op.edits:
        raise ClinicError(f"operator {op.id!r} has no edit for template {template!r} "
                          f"(it has: {', '.join(op.templates)})")
    return op.edits[template]


def apply_operator(operator: str | Operator, template: str, source: str | None = None) -> str:
    """The template's source with the operator's edit applied; fails loudly unless the anchor is there exactly once
    and the replacement is then there exactly once (so the edit can be reverted exactly)."""
    op = get_operator(operator) if isinstance(operator, str) else operator
    if "~" in template:  # a surface variant: the base template's mutant, renamed
        from torchdoctor.clinic.surface import base_template, rename

        if source is not None:
            raise ClinicError(f"apply_operator on a surface variant ({template!r}) takes no source: edit the base "
                              "template's script, then rename it (surface.rename)")
        return rename(apply_operator(op, base_template(template)), template)
    edit = _edit(op, template)
    source = template_source(template) if source is None else source
    found = source.count(edit.anchor)
    if found != 1:
        raise ClinicError(f"operator {op.id!r} on {template!r}: anchor {edit.anchor!r} found {found} times, not once")
    mutant = source.replace(edit.anchor, edit.replacement)
    if mutant.count(edit.replacement) != 1:
        raise ClinicError(f"operator {op.id!r} on {template!r}: the replacement {edit.replacement!r} is not unique "
                          "in the mutant, so the edit could not be reverted exactly")
    return mutant


def revert(operator: str | Operator, template: str, mutant: str) -> str:
    """Undo the operator's edit in ``mutant`` (the fix); fails loudly unless the replacement is there exactly once.
    Base templates only: a variant's edit is its base template's, renamed, which the gate checks on the base."""
    op = get_operator(operator) if isinstance(operator, str) else operator
    edit = _edit(op, template)
    found = mutant.count(edit.replacement)
    if found != 1:
        raise ClinicError(f"operator {op.id!r} on {template!r}: edit {edit.replacement!r} found {found} times, "
                          "not once")
    return mutant.replace(edit.replacement, edit.anchor)
