#!/usr/bin/python3
"""Prints the expected numbers of tests/unit/train/optim_test.cpp, computed with PyTorch (Debian's
python3-torch 1.13). Run once by hand; the test holds the numbers, not this script.

The problem: parameters w [2, 3] and b [3]; the gradient of each parameter p at a step is
a * (p - t) + cos(p) (float32), the gradient of 0.5 * sum(a * (p - t)^2) + sum(sin(p)).
"""
import torch

torch.set_default_dtype(torch.float32)
W0 = [[0.5, -1.2, 0.3], [2.0, -0.7, 0.1]]
B0 = [0.05, -0.3, 1.5]
AW = [[1.0, 2.0, 0.5], [3.0, 0.25, 1.5]]
TW = [[0.1, 0.2, -0.3], [1.0, 0.0, 0.5]]
AB = [0.5, 4.0, 1.0]
TB = [1.0, -1.0, 0.0]
STEPS = 5


def grads(params):
    out = []
    for p, a, t in zip(params, (torch.tensor(AW), torch.tensor(AB)), (torch.tensor(TW), torch.tensor(TB))):
        out.append(a * (p.detach() - t) + torch.cos(p.detach()))
    return out


def novograd_step(params, state, lr, betas=(0.95, 0.98), eps=1e-8, weight_decay=0.0, grad_averaging=False,
                  amsgrad=False, luc=False, luc_trust=1e-3, luc_eps=1e-8):
    # NVIDIA's NovoGrad as NeMo (nemo/core/optim/novograd.py) defines it, written out with torch ops.
    beta1, beta2 = betas
    for p in params:
        g = p.grad.clone()
        s = state.setdefault(id(p), {"exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros([]),
                                     "max_exp_avg_sq": torch.zeros([])})
        norm = g.norm().pow(2)
        if s["exp_avg_sq"] == 0:
            s["exp_avg_sq"].copy_(norm)
        else:
            s["exp_avg_sq"].mul_(beta2).add_(norm, alpha=1.0 - beta2)
        if amsgrad:
            torch.max(s["max_exp_avg_sq"], s["exp_avg_sq"], out=s["max_exp_avg_sq"])
            denom = s["max_exp_avg_sq"].sqrt().add_(eps)
        else:
            denom = s["exp_avg_sq"].sqrt().add_(eps)
        g.div_(denom)
        if weight_decay != 0:
            g.add_(p.data, alpha=weight_decay)
        if grad_averaging:
            g.mul_(1 - beta1)
        s["exp_avg"].mul_(beta1).add_(g)
        step_lr = lr
        if luc:
            factor = luc_trust * torch.norm(p.data) / (torch.norm(s["exp_avg"]) + luc_eps)
            step_lr = min(factor.item(), lr)
        p.data.add_(s["exp_avg"], alpha=-step_lr)


def run(make, clip_norm=None):
    w = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(B0, requires_grad=True)
    opt = make([w, b])
    state = {}
    for _ in range(STEPS):
        gw, gb = grads([w, b])
        w.grad, b.grad = gw, gb
        if clip_norm is not None:
            torch.nn.utils.clip_grad_norm_([w, b], clip_norm)
        if callable(opt):
            opt([w, b], state)
        else:
            opt.step()
    return w.detach().flatten().tolist() + b.detach().tolist()


O = torch.optim
CASES = [
    ("sgd", '{"name", "sgd"}, {"lr", 0.1}', lambda p: O.SGD(p, lr=0.1)),
    ("sgd_l2", '{"name", "sgd"}, {"lr", 0.1}, {"weight_decay", 0.01}', lambda p: O.SGD(p, lr=0.1, weight_decay=0.01)),
    ("momentum", '{"name", "momentum"}, {"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.1}',
     lambda p: O.SGD(p, lr=0.1, momentum=0.9, dampening=0.1)),
    ("nesterov", '{"name", "nesterov"}, {"lr", 0.05}, {"weight_decay", 0.001}',
     lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.001)),
    ("adagrad", '{"name", "adagrad"}, {"lr", 0.1}, {"lr_decay", 0.01}, {"weight_decay", 0.01}, '
     '{"initial_accumulator_value", 0.1}',
     lambda p: O.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1)),
    ("rmsprop", '{"name", "rmsprop"}, {"lr", 0.01}', lambda p: O.RMSprop(p, lr=0.01)),
    ("rmsprop_centered", '{"name", "rmsprop"}, {"lr", 0.01}, {"alpha", 0.9}, {"momentum", 0.5}, {"centered", true}, '
     '{"weight_decay", 0.01}',
     lambda p: O.RMSprop(p, lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.01)),
    ("adadelta", '{"name", "adadelta"}, {"rho", 0.9}, {"weight_decay", 0.01}',
     lambda p: O.Adadelta(p, lr=1.0, rho=0.9, weight_decay=0.01)),
    ("adam", '{"name", "adam"}, {"lr", 0.01}, {"betas", {0.8, 0.99}}, {"weight_decay", 0.01}',
     lambda p: O.Adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.01)),
    ("adam_amsgrad", '{"name", "adam"}, {"lr", 0.01}, {"amsgrad", true}', lambda p: O.Adam(p, lr=0.01, amsgrad=True)),
    ("adamw", '{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}',
     lambda p: O.AdamW(p, lr=0.01, weight_decay=0.1)),
    ("novograd", '{"name", "novograd"}, {"lr", 0.01}',
     lambda p: (lambda ps, st: novograd_step(ps, st, lr=0.01))),
    ("novograd_options", '{"name", "novograd"}, {"lr", 0.01}, {"betas", {0.9, 0.99}}, {"weight_decay", 0.01}, '
     '{"grad_averaging", true}, {"amsgrad", true}',
     lambda p: (lambda ps, st: novograd_step(ps, st, lr=0.01, betas=(0.9, 0.99), weight_decay=0.01,
                                             grad_averaging=True, amsgrad=True))),
    ("novograd_luc", '{"name", "novograd"}, {"lr", 0.01}, {"luc", true}, {"luc_trust", 0.02}',
     lambda p: (lambda ps, st: novograd_step(ps, st, lr=0.01, luc=True, luc_trust=0.02))),
]


def fmt(values):
    return "{" + ", ".join("%.9gf" % v for v in values) + "}"


for name, config, make in CASES:
    print('    {"%s", {%s},\n     %s},' % (name, config, fmt(run(make))))
print('    // clip_grad_norm: 0.5 before each step')
print('    {"sgd_clip", {{"name", "sgd"}, {"lr", 0.1}, {"clip_grad_norm", 0.5}},\n     %s},'
      % fmt(run(lambda p: O.SGD(p, lr=0.1), clip_norm=0.5)))

# Clipping on the first step's gradients.
for norm_type, max_norm in ((2.0, 1.0), (float("inf"), 0.5)):
    w = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(B0, requires_grad=True)
    w.grad, b.grad = grads([w, b])
    total = torch.nn.utils.clip_grad_norm_([w, b], max_norm, norm_type)
    print("clip_grad_norm(%s, %s): total %.9g, grads %s" % (max_norm, norm_type, total.item(),
          fmt(w.grad.flatten().tolist() + b.grad.tolist())))
w = torch.tensor(W0, requires_grad=True)
b = torch.tensor(B0, requires_grad=True)
w.grad, b.grad = grads([w, b])
torch.nn.utils.clip_grad_value_([w, b], 0.4)
print("clip_grad_value(0.4): grads %s" % fmt(w.grad.flatten().tolist() + b.grad.tolist()))
