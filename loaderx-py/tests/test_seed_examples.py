"""The loaderx 0.9.11 specification's examples, run as written (inputs created first)."""

import numpy as np


def test_quick_start(in_tmp, capsys):
    np.save("data.npy", np.random.default_rng(0).random((2000, 3, 8), dtype=np.float32))
    np.save("label.npy", np.arange(2000, dtype=np.int64))
    # --- the seed's Quick Start, verbatim ---
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset
    from loaderx.dataloader import DataLoader

    from_numpy('train_data', np.load('data.npy', mmap_mode='r'))
    from_numpy('train_label', np.load('label.npy', mmap_mode='r'))

    loader = DataLoader({'data': DenseDataset('train_data'), 'label': DenseDataset('train_label')},
                        transform=lambda batch: batch)

    for i, batch in enumerate(loader):
        if i >= 256:
            break

    print(batch['data'].shape)
    print(batch['label'].shape)
    # --- end ---
    assert capsys.readouterr().out == "(256, 3, 8)\n(256,)\n"
    data = np.load("data.npy")
    np.testing.assert_array_equal(batch["data"], data[batch["label"]])
    loader.close()


def test_converting_a_numpy_tensor(in_tmp):
    rng = np.random.default_rng(1)
    np.save("data.npy", rng.integers(0, 8, (500, 16, 16), dtype=np.uint8))
    np.save("label.npy", rng.integers(0, 10, 500))
    images = np.repeat(np.arange(256, dtype=np.uint8)[None, :], 400, axis=0).reshape(400, 16, 16)
    # --- verbatim ---
    import numpy as np_
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    from_numpy('train_data', np_.load('data.npy', mmap_mode='r'))
    from_numpy('train_label', np_.load('label.npy', mmap_mode='r'))

    # many small, similar records compress far better against a trained dictionary:
    from_numpy('train_data', images, codec='zstd_dict')
    ds = DenseDataset('train_data')
    # --- end ---
    assert (in_tmp / "train_data" / "dict.zr").is_file()
    assert len(ds) == 400 and ds.item_shape == (16, 16)
    np.testing.assert_array_equal(ds[[0, 399, 7]], images[[0, 399, 7]])
    np.testing.assert_array_equal(DenseDataset("train_label")[:], np.load("label.npy"))


def test_records(in_tmp):
    # --- verbatim ---
    import numpy as np
    from loaderx.converter import from_numpy
    from loaderx.dataset import DenseDataset

    from_numpy('data', np.arange(64, dtype=np.float32).reshape(8, 2, 4))
    ds = DenseDataset('data')
    ds[[0, 5, 2]]                       # (3, 2, 4) — shape straight from the schema
    # --- end ---
    np.testing.assert_array_equal(ds[[0, 5, 2]], np.arange(64, dtype=np.float32).reshape(8, 2, 4)[[0, 5, 2]])

    # --- verbatim ---
    from loaderx.converter import from_iterator
    from loaderx.dataset import RaggedDataset, pad

    seqs = [np.arange(L, dtype=np.int32) for L in (3, 1, 4, 1, 5)]
    from_iterator('tokens', seqs)
    rs = RaggedDataset('tokens')

    records = rs[[0, 2, 4]]              # list of ndarray — one per record
    padded, lengths = pad(records)       # dense (B, max_len) + row counts
    # --- end ---
    assert [r.tolist() for r in records] == [[0, 1, 2], [0, 1, 2, 3], [0, 1, 2, 3, 4]]
    assert padded.tolist() == [[0, 1, 2, 0, 0], [0, 1, 2, 3, 0], [0, 1, 2, 3, 4]]
    assert lengths.tolist() == [3, 4, 5]


def test_collate_example(in_tmp):
    from loaderx.converter import from_numpy
    from loaderx.dataloader import DataLoader
    from loaderx.dataset import DenseDataset

    from_numpy("tok", np.arange(100 * 12, dtype=np.int32).reshape(100, 12))
    from_numpy("lab", np.arange(100, dtype=np.int64))
    dense_tokens, labelset = DenseDataset("tok"), DenseDataset("lab")

    # --- verbatim ---
    def collate(batch):
        return {'input_ids': batch['tokens'], 'label': batch['label']}

    loader = DataLoader({'tokens': dense_tokens, 'label': labelset}, batch_size=32,
                        transform=collate)
    # --- end ---
    with loader:
        b = next(loader)
        assert set(b) == {"input_ids", "label"} and b["input_ids"].shape == (32, 12)
        np.testing.assert_array_equal(b["input_ids"][:, 0] // 12, b["label"])
