"""Reading and writing the public ELMo weight format (options.json + hdf5), and the biLM's fingerprint.

Every difference between the TF layout of the files and our PyTorch modules lives in ``_layout`` below,
one line of reason each. Reading validates every dataset and raises ``WeightFileError`` naming the file,
the dataset, the expected and the found shape, never a raw h5py or torch traceback.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ner_app.bilm.bilm import BidirectionalLM
from ner_app.bilm.options import BilmOptions, read_options, write_options
from ner_app.errors import NerAppError
from ner_app.files import atomic_path

if TYPE_CHECKING:
    import h5py  # imported where a file is read or written: a tagger without ELMo never needs it (0.2 s)


class WeightFileError(NerAppError):
    """A weight file that does not fit the options or is not a weight file at all."""


# A layout entry: file dataset name, expected file shape, and how to go between file array and module tensor.
Getter = Callable[..., torch.Tensor]  # called with no argument (defaults bind loop variables)
Setter = Callable[[np.ndarray], None]


def _layout(bilm: BidirectionalLM) -> Iterator[tuple[str, tuple[int, ...], Getter, Setter]]:
    """Yield (dataset, file shape, read-from-module as file array, write-file-array-into-module)."""
    enc = bilm.token_encoder
    emb = enc.char_cnn.char_embed.weight

    def param_setter(param: torch.Tensor, to_module: Callable[[torch.Tensor], torch.Tensor]) -> Setter:
        def set_(array: np.ndarray) -> None:
            with torch.no_grad():
                param.copy_(to_module(torch.from_numpy(np.asarray(array, dtype=np.float32))))

        return set_

    # The file has no row for padding id 0 (always zero), so it holds rows 1..261 only.
    yield "char_embed", (emb.shape[0] - 1, emb.shape[1]), lambda: emb[1:], param_setter(emb[1:], lambda a: a)
    for i, conv in enumerate(enc.char_cnn.convs):
        count, dim, width = conv.weight.shape
        assert conv.bias is not None  # every convolution of the char CNN has a bias
        # TF conv2d kernels are (1, width, in, out); torch Conv1d weights are (out, in, width).
        yield (
            f"CNN/W_cnn_{i}",
            (1, width, dim, count),
            lambda c=conv: c.weight.permute(2, 1, 0)[None],
            param_setter(conv.weight, lambda a: a[0].permute(2, 1, 0)),
        )
        yield f"CNN/b_cnn_{i}", (count,), lambda c=conv: c.bias, param_setter(conv.bias, lambda a: a)
    dim = enc.highway.dim
    for k, layer in enumerate(enc.highway.layers):
        for j, part in enumerate(("transform", "carry")):
            rows = slice(j * dim, (j + 1) * dim)
            # TF matrices are (in, out), torch Linear is (out, in); we fuse transform and carry in one Linear.
            yield (
                f"CNN_high_{k}/W_{part}",
                (dim, dim),
                lambda w=layer.weight, r=rows: w[r].t(),
                param_setter(layer.weight[rows], lambda a: a.t()),
            )
            yield (
                f"CNN_high_{k}/b_{part}",
                (dim,),
                lambda b=layer.bias, r=rows: b[r],
                param_setter(layer.bias[rows], lambda a: a),
            )
    proj = enc.projection
    # TF matrices are (in, out), torch Linear is (out, in).
    yield (
        "CNN_proj/W_proj",
        tuple(proj.weight.shape[::-1]),
        lambda: proj.weight.t(),
        param_setter(proj.weight, lambda a: a.t()),
    )
    yield "CNN_proj/b_proj", tuple(proj.bias.shape), lambda: proj.bias, param_setter(proj.bias, lambda a: a)
    for d, layers in enumerate((bilm.lstm.forward_layers, bilm.lstm.backward_layers)):
        for lnum, cell in enumerate(layers):
            prefix = f"RNN_{d}/RNN/MultiRNNCell/Cell{lnum}/LSTMCell"
            w_in, w_state = cell.input_linearity.weight, cell.state_linearity.weight  # (4C, I), (4C, P)
            n_in = w_in.shape[1]
            # TF keeps one (I + P, 4C) matrix for [x_t; h_{t-1}]; we split it into input and state parts.
            yield (
                f"{prefix}/W_0",
                (n_in + w_state.shape[1], w_in.shape[0]),
                lambda a=w_in, b=w_state: torch.cat([a, b], dim=1).t(),
                _split_setter(w_in, w_state, n_in),
            )
            # B is stored without TF's forget bias; the cell adds forget_bias at run time, as TF does.
            bias = cell.input_linearity.bias
            yield f"{prefix}/B", tuple(bias.shape), lambda b=bias: b, param_setter(bias, lambda a: a)
            # The projection is (C, P) in TF, (P, C) as a torch Linear.
            wp = cell.projection.weight
            yield (
                f"{prefix}/W_P_0",
                tuple(wp.shape[::-1]),
                lambda w=wp: w.t(),
                param_setter(wp, lambda a: a.t()),
            )


def _split_setter(w_in: torch.Tensor, w_state: torch.Tensor, n_in: int) -> Setter:
    def set_(array: np.ndarray) -> None:
        full = torch.from_numpy(np.asarray(array, dtype=np.float32)).t()  # (4C, I + P)
        with torch.no_grad():
            w_in.copy_(full[:, :n_in])
            w_state.copy_(full[:, n_in:])

    return set_


def _datasets(f: h5py.File) -> set[str]:
    import h5py

    names: set[str] = set()
    f.visititems(lambda name, obj: names.add(name) if isinstance(obj, h5py.Dataset) else None)
    return names


@contextmanager
def _hdf5_errors(path: Path) -> Iterator[None]:
    """h5py's own errors inside a file it opened (a flipped byte in a heap or a B-tree) as one line."""
    try:
        yield
    except NerAppError:
        raise
    except (RuntimeError, OSError, KeyError, ValueError, TypeError, IndexError) as err:
        raise WeightFileError(
            f"{path}: corrupt HDF5 content ({type(err).__name__}: {str(err)[:80]})"
        ) from None


def load_weights(bilm: BidirectionalLM, weights_path: str | Path) -> None:
    """Fill ``bilm`` from a weights hdf5 in the public ELMo layout, checking every dataset first."""
    import h5py

    path = Path(weights_path)
    if not path.is_file():
        raise WeightFileError(f"{path}: no such weight file")
    try:
        f = h5py.File(path, "r")
    except OSError as err:
        raise WeightFileError(
            f"{path}: not an HDF5 file (expected ELMo weights in hdf5 format): {err}"
        ) from None
    with f, _hdf5_errors(path):
        layout = list(_layout(bilm))
        expected = {name for name, *_ in layout}
        extra = sorted(n for n in _datasets(f) - expected if not n.startswith("softmax/"))
        if extra:
            raise WeightFileError(
                f"{path}: dataset '{extra[0]}' is not described by the options (filters, n_highway or n_layers "
                f"contradict the weights; {len(extra)} unexpected dataset(s))"
            )
        for name, shape, _, setter in layout:
            if name not in f or not isinstance(f[name], h5py.Dataset):
                raise WeightFileError(f"{path}: missing dataset '{name}' (expected shape {shape})")
            found = tuple(f[name].shape)
            if found != shape:
                raise WeightFileError(
                    f"{path}: dataset '{name}' has shape {found}, expected {shape} from the options"
                )
            if not np.issubdtype(f[name].dtype, np.floating):
                raise WeightFileError(f"{path}: dataset '{name}' has dtype {f[name].dtype}, expected float32")
            array = f[name][...]
            if not np.isfinite(array).all():  # a NaN biLM would train and export NaN taggers
                raise WeightFileError(f"{path}: dataset '{name}' holds NaN or infinite values")
            setter(array)


def save_weights(bilm: BidirectionalLM, weights_path: str | Path) -> None:
    """Write ``bilm`` as a weights hdf5 in the public ELMo layout (float32); reading it back is exact."""
    import h5py

    # Built in memory, then written with plain file I/O: a full disk is then an OSError from write(), where
    # h5py writing to disk crashed the process after its own error (docs/reliability.md).
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        for name, shape, getter, _ in _layout(bilm):
            array = getter().detach().float().cpu().contiguous().numpy()
            assert array.shape == shape, (name, array.shape, shape)
            f.create_dataset(name, data=array)
    with atomic_path(weights_path) as tmp, open(tmp, "wb") as out:
        out.write(buffer.getbuffer())


def precheck_weights(options: BilmOptions, weights_path: str | Path) -> None:
    """The options' sizes against the hdf5's dataset shapes, before the biLM is built: a wrong or hostile
    options.json fails here, naming the key, instead of allocating what it asks for."""
    import h5py

    path = Path(weights_path)
    try:
        f = h5py.File(path, "r")
    except (OSError, IsADirectoryError):
        return  # load_weights reports an unreadable file
    with f, _hdf5_errors(path):
        cell = "RNN_0/RNN/MultiRNNCell/Cell{}/LSTMCell"
        wp = f"{cell.format(0)}/W_P_0"
        checks = [
            ("char_cnn.embedding.dim", "char_embed", 1, options.char_dim, None),
            (
                "lstm.dim",
                f"{cell.format(0)}/W_0",
                1,
                4 * options.lstm_dim,
                (2 * options.projection_dim, 4 * options.lstm_dim),
            ),
            (
                "lstm.projection_dim",
                wp,
                1,
                options.projection_dim,
                (options.lstm_dim, options.projection_dim),
            ),
        ]
        for key, name, axis, value, expected in checks:
            shape = f[name].shape if isinstance(f.get(name), h5py.Dataset) else None
            if shape is not None and len(shape) > axis and shape[axis] != value:
                want = expected or tuple(value if i == axis else n for i, n in enumerate(shape))
                raise WeightFileError(
                    f"{path}: dataset '{name}' has shape {tuple(shape)}, expected {want} from the options "
                    f"('{key}')"
                )
        layers = sum(1 for k in range(options.n_layers + 1) if cell.format(k) in f)
        if cell.format(0) in f and layers > options.n_layers:
            raise WeightFileError(
                f"{path}: dataset '{cell.format(options.n_layers)}/B' is not described by the options "
                f"('lstm.n_layers' is {options.n_layers}, the file has more layers)"
            )


def load_bilm(
    options_path: str | Path, weights_path: str | Path, stateful: bool = False, random_fills: bool = True
) -> BidirectionalLM:
    """Build a biLM from options.json and fill it from the weights hdf5 (frozen use: call ``.eval()``).

    ``random_fills=False`` skips the random initialisation that the file overwrites (0.4 s of the original
    size's load; the parameters start at zero, and the file sets all of them but the char embedding's padding
    row, which is zero either way: tested). Training keeps the fills: they draw from torch's global random
    stream, and a seeded run's later draws (the tagger's initialisation, dropout) depend on it."""
    options = read_options(options_path)
    precheck_weights(options, weights_path)  # sizes against the file before any allocation
    bilm = options.build(stateful=stateful, random_fills=random_fills)
    load_weights(bilm, weights_path)
    return bilm


def save_bilm(bilm: BidirectionalLM, directory: str | Path) -> tuple[Path, Path]:
    """Write ``options.json`` and ``weights.hdf5`` into ``directory``; returns both paths."""
    directory = Path(directory)
    options_path, weights_path = directory / "options.json", directory / "weights.hdf5"
    write_options(BilmOptions.from_model(bilm), options_path)
    save_weights(bilm, weights_path)
    return options_path, weights_path


# Salts the fingerprint; unchanged since the first layer cache, so older exports and records keep their value.
FINGERPRINT_FORMAT = "ner_app.layer_cache/1"


def bilm_fingerprint(bilm: BidirectionalLM) -> str:
    """sha256 of the architecture and of every state-dict tensor (name, shape, dtype, raw bytes)."""
    digest = hashlib.sha256(FINGERPRINT_FORMAT.encode())
    digest.update(json.dumps(BilmOptions.from_model(bilm).to_dict(), sort_keys=True).encode())
    for name, tensor in bilm.state_dict().items():
        flat = tensor.detach().cpu().contiguous().reshape(-1)
        digest.update(f"\x00{name}\x00{tuple(tensor.shape)}\x00{tensor.dtype}\x00".encode())
        digest.update(flat.view(torch.uint8).numpy())  # raw bytes, no copy: ~1 s for 93M parameters
    return digest.hexdigest()
