"""Actor-critic (pytorch/examples reinforcement_learning shape) on a CartPole-like NumPy environment.

A shared hidden layer feeds an action head (softmax -> torch.distributions.Categorical) and a
value head. After each episode the discounted returns are normalised, the policy loss is
-log_prob * advantage, the value loss smooth_l1_loss(value, return), minus a small entropy
bonus; Adam on their sum.
One step = one episode; returned: that episode's loss.

Determinism: Categorical.sample() draws from the framework's generator, so two frameworks would
pick different actions and play different episodes. Instead each action is picked by inverse-CDF
sampling of the policy's probabilities with a uniform number drawn in NumPy (the same
distribution as m.sample()); log_prob, entropy and the rest go through Categorical as usual.
The environment's own randomness (reset states) is NumPy's too.
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

GAMMA, HIDDEN, MAX_STEPS, ENTROPY_BONUS = 0.99, 32, 60, 1e-3
EPS = np.finfo(np.float32).eps.item()


class CartPole:
    """The classic cart-pole balancing dynamics (Euler integration), in NumPy float64."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold, x_threshold = 12 * 2 * math.pi / 360, 2.4

    def __init__(self, rng):
        self.rng = rng
        self.state = None

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, size=4)
        return self.state.copy()

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        total_mass = self.masspole + self.masscart
        polemass_length = self.masspole * self.length
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + polemass_length * theta_dot ** 2 * sintheta) / total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * xacc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc
        self.state = np.array([x, x_dot, theta, theta_dot])
        done = abs(x) > self.x_threshold or abs(theta) > self.theta_threshold
        return self.state.copy(), 1.0, done


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, HIDDEN)
        self.action_head = nn.Linear(HIDDEN, 2)
        self.value_head = nn.Linear(HIDDEN, 1)

    def forward(self, x):
        x = F.relu(self.affine1(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values


def select_action(model, state, u):
    """Samples an action from the policy; `u` ~ U(0, 1) from NumPy picks it (see the docstring)."""
    state = torch.from_numpy(state).float()
    probs, state_value = model(state)
    m = Categorical(probs)
    cdf = probs.detach().cumsum(dim=-1)
    action = min(int((cdf < u).sum().item()), probs.size(-1) - 1)
    action = torch.tensor(action)
    return action.item(), m.log_prob(action), m.entropy(), state_value


def main(steps=30, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(543)
    model = Policy()
    if save_weights_to is not None:
        torch.save(model.state_dict(), save_weights_to)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path))

    optimizer = optim.Adam(model.parameters(), lr=5e-3)
    rng = np.random.default_rng(data_seed)
    env = CartPole(rng)
    losses, running_reward = [], 10.0
    for _ in range(steps):
        state, ep_reward = env.reset(), 0.0
        saved, rewards = [], []
        for _ in range(MAX_STEPS):
            action, log_prob, entropy, value = select_action(model, state, rng.uniform())
            saved.append((log_prob, entropy, value))
            state, reward, done = env.step(action)
            rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + 0.95 * running_reward

        R, returns = 0.0, []
        for r in reversed(rewards):
            R = r + GAMMA * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + EPS)
        policy_losses, value_losses, entropies = [], [], []
        for (log_prob, entropy, value), R in zip(saved, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
            entropies.append(entropy)
        optimizer.zero_grad()
        loss = (torch.stack(policy_losses).mean() + torch.stack(value_losses).mean()
                - ENTROPY_BONUS * torch.stack(entropies).mean())
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"episode {step:3d}  loss {loss:.4f}")
