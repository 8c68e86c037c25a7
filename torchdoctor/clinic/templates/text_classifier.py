"""A text classifier on generated token sequences: each class has its own keywords among shared noise tokens."""

import os

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SEED = int(os.environ.get("CLINIC_SEED", "0"))
OUT = os.environ.get("CLINIC_OUT", ".")
# --- protected: the number of epochs ---
EPOCHS = 6
# --- end protected ---
VOCAB, LENGTH, NUM_CLASSES = 50, 12, 4
torch.manual_seed(SEED)


# --- protected: the data (the grader draws its own sentences from the same law) ---
def make_sentences(n, rng):
    labels = rng.randint(NUM_CLASSES, size=n)
    tokens = rng.randint(20, VOCAB, size=(n, LENGTH))
    for i, c in enumerate(labels):
        where = rng.choice(LENGTH, size=3, replace=False)
        tokens[i, where] = 5 * c + rng.randint(5, size=3)
    return tokens, labels


tokens_train, labels_train = make_sentences(1000, np.random.RandomState(0))
# --- end protected ---


class Sentences(Dataset):
    def __init__(self, tokens, labels):
        self.tokens, self.labels = tokens, labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.tensor(self.tokens[i], dtype=torch.long), int(self.labels[i])


class BagOfEmbeddings(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, 16)
        self.out = nn.Linear(16, NUM_CLASSES)

    def forward(self, tokens):
        h = self.embed(tokens).mean(dim=1)
        return self.out(h)


def build_model(vocab_size=VOCAB):
    return BagOfEmbeddings(vocab_size)


# --- protected: evaluation (the grader calls predict() on data of its own) ---
def predict(model, tokens):
    model.eval()
    with torch.no_grad():
        return model(torch.tensor(tokens, dtype=torch.long)).argmax(dim=1)
# --- end protected ---


def main():
    loader = DataLoader(Sentences(tokens_train, labels_train), batch_size=32, shuffle=True)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(EPOCHS):
        running = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            running += loss.item()
        print(f"epoch {epoch}: loss {running / len(loader):.4f}")
    path = os.path.join(OUT, "checkpoint.pt")
    torch.save({"model": model.state_dict(), "epochs": EPOCHS}, path)
    restored = build_model()
    restored.load_state_dict(torch.load(path, weights_only=True)["model"])
    print(f"saved to {path}")


if __name__ == "__main__":
    main()
