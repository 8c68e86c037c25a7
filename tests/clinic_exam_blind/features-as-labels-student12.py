"""Linear regression on generated data: y = X w + b + noise, fitted by SGD through a Dataset and a DataLoader."""

import os

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SEED = int(os.environ.get("CLINIC_SEED", "0"))
OUT = os.environ.get("CLINIC_OUT", ".")
# --- protected: the number of epochs ---
EPOCHS = 10
# --- end protected ---
torch.manual_seed(SEED)

# --- protected: the data (the grader draws its own points from the same law) ---
rng = np.random.RandomState(0)
TRUE_W, TRUE_B = np.array([2.0, -3.0, 0.5]), 1.0
X_train = rng.randn(800, 3)
y_train = X_train @ TRUE_W + TRUE_B + 0.1 * rng.randn(800)
# --- end protected ---


class Points(Dataset):
    def __init__(self, X, y):
        self.X = torch.tensor(X, dtype=torch.float32)
        self.y = torch.tensor(y, dtype=torch.float32).unsqueeze(1)

    def __len__(self):
        return len(self.X)

    def __getitem__(self, i):
        return self.X[i], self.y[i]


def build_model():
    return nn.Linear(3, 1)


# --- protected: evaluation (the grader calls predict() on data of its own) ---
def predict(model, X):
    with torch.no_grad():
        return model(torch.tensor(X, dtype=torch.float32)).squeeze(1)
# --- end protected ---


def main():
    loader = DataLoader(Points(X_train, y_train), batch_size=32, shuffle=True)
    loss_fn = nn.MSELoss()
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
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
    print(f"w = {model.weight.data.tolist()}, b = {model.bias.item():.3f}; saved to {path}")


if __name__ == "__main__":
    main()
