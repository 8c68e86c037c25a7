"""A digits classifier: a small MLP on scikit-learn's 8x8 digits (bundled with scikit-learn, no download)."""

import os

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

SEED = int(os.environ.get("CLINIC_SEED", "0"))
OUT = os.environ.get("CLINIC_OUT", ".")
# --- protected: the number of epochs ---
EPOCHS = 6
# --- end protected ---
torch.manual_seed(SEED)

# --- protected: the data split (the grader evaluates on digits the script never sees) ---
digits = load_digits()
order = np.random.RandomState(0).permutation(len(digits.target))
X_train, y_train = digits.data[order[:1200]], digits.target[order[:1200]]
# --- end protected ---

mean, std = X_train.mean(), X_train.std()


def prepare(X):
    return torch.tensor((X - mean) / std, dtype=torch.float32)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 64)
        self.drop = nn.Dropout(0.1)
        self.out = nn.Linear(64, 10)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = torch.relu(self.fc2(h))
        return self.out(self.drop(h))


def build_model():
    return MLP()


# --- protected: evaluation (the grader calls predict() on data of its own) ---
def predict(model, X):
    model.eval()
    with torch.no_grad():
        return model(prepare(X)).argmax(dim=1)
# --- end protected ---


def main():
    dataset = TensorDataset(prepare(X_train), torch.tensor(y_train, dtype=torch.long))
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    print(f"training on {len(dataset)} examples, labels {int(y_train.min())}..{int(y_train.max())}")
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    loss_fn = nn.CrossEntropyLoss()
    running, steps, predictions = 0.0, 0, []
    for epoch in range(EPOCHS):
        for x, y in loader:
            optimizer.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            optimizer.step()
            running += loss.item()
            steps += 1
            predictions.append(out.argmax(dim=1))
        print(f"epoch {epoch}: mean loss so far {running / steps:.4f}")
    path = os.path.join(OUT, "checkpoint.pt")
    torch.save({"model": model.state_dict(), "epochs": EPOCHS}, path)
    restored = build_model()
    restored.load_state_dict(torch.load(path, weights_only=True)["model"])
    print(f"saved to {path}; predictions kept for a confusion matrix: {len(predictions)} batches")


if __name__ == "__main__":
    main()
