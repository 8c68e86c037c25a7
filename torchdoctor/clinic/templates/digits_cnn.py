"""A digits classifier: a small CNN on scikit-learn's 8x8 digits (bundled with scikit-learn, no download)."""

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


def prepare(X):
    return torch.tensor(X / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = x.flatten(1)
        return self.fc(x)


def build_model():
    return CNN()


# --- protected: evaluation (the grader calls predict() on data of its own) ---
def predict(model, X):
    model.eval()
    with torch.no_grad():
        return model(prepare(X)).argmax(dim=1)
# --- end protected ---


def main():
    dataset = TensorDataset(prepare(X_train), torch.tensor(y_train, dtype=torch.long))
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    model = build_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
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
    print(f"saved to {path}")


if __name__ == "__main__":
    main()
