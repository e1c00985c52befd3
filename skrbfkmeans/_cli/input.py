"""What the command line reads, and the checks made before any work.

:func:`read_input` reads INPUT, a ``.csv`` (with or without a header row)
or a ``.npy``, into a float array, keeping the columns ``--columns``
selects (by default all, less an index column and the columns of text,
each left out with a note); every problem with it is a
:class:`~skrbfkmeans._cli.errors.CLIError` naming the file and, for a
``.csv``, the line. :func:`check_output` and :func:`check_replaceable`
refuse, before the minutes of work rather than after, an output that could
not or should not be written: the input itself, or a read-only file, unless
``--force``.
"""

import csv
import itertools
import math
import os

import numpy as np

from .errors import CLIError, note, warn
from .output import name_max


def read_input(path, header=None, columns=None):
    """Read INPUT (``.csv`` or ``.npy``): ``(X, feature names or None)``.

    ``header`` (``.csv`` only): whether the first row is a header; ``None``
    decides from the file (see :func:`_read_csv`). ``columns`` (the parsed
    ``--columns``): the columns to keep, in that order, each a name (a
    ``str``, from the header) or a position (an ``int``, from 1); ``None``
    keeps them all, less the columns of text (:func:`_text_columns`) and
    an index column (:func:`_drop_index`), each left out with a note.
    """
    if not os.path.exists(path):
        raise CLIError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CLIError(f"{path}: is a directory")
    extension = os.path.splitext(path)[1].lower()
    if extension not in (".csv", ".npy"):
        raise CLIError(
            f"{path}: unknown extension {extension or '(none)'!r}; "
            "INPUT must be .csv or .npy"
        )
    if header is not None and extension != ".csv":
        raise CLIError(f"{path}: --header and --no-header apply to .csv input")
    try:
        positions = None
        if extension == ".csv":
            X, names, positions = _read_csv(path, header, columns)
        else:
            X, names = _read_npy(path)
            if columns is not None:
                X = X[:, _column_indices(columns, None, X.shape[1], path)]
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None
    bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
    if bad.size:
        raise CLIError(f"{path}: NaN or infinite value in row {bad[0]}")
    if columns is None and names is not None:
        X, names = _drop_index(path, X, names, positions)
    return X, names


# The names under which a first column is taken for an index (lower case):
# pandas' to_csv writes the index under its name, empty by default, and
# read_csv names an empty header cell "Unnamed: 0".
INDEX_NAMES = ("", "index", "idx", "id", "row", "unnamed: 0")


def _is_index_name(name):
    """Whether a column named ``name`` is named like an index (``id``, ``user_id``)."""
    name = name.strip().lower()
    return name in INDEX_NAMES or name.endswith(("_id", " id"))


def _drop_index(path, X, names, positions):
    """Leave out an index column of a file with a header, with a note.

    ``DataFrame.to_csv`` writes the index first, under an empty header cell
    or the index's name: clustered as a feature, it would outweigh the
    others (iris, named index: inertia 31345 instead of 79.85), and a
    shuffled one would decide the clusters. The first column of the file
    is that index when it is named like one (:func:`_is_index_name`) and
    holds distinct integers, and is left out; named like one and holding
    other values, it is kept, with a warning. ``positions`` are the file's
    columns (from 0) that ``X`` holds.
    """
    if len(names) < 2 or positions[0] != 0 or not _is_index_name(names[0]):
        return X, names
    first = X[:, 0]
    what = "no name" if not names[0] else f"the name {names[0]!r}"
    if np.array_equal(first, np.round(first)) and np.unique(first).size == first.size:
        note(
            f"left out column 1 of {path}: distinct integers under {what}, an "
            f"index; --columns {_ranges(positions)} keeps it"
        )
        return X[:, 1:], names[1:]
    warn(
        f"column 1 of {path} has {what}: if it is an index, leave it out "
        f"with --columns {_ranges(positions[1:])}"
    )
    return X, names


def _ranges(positions):
    """``--columns`` of the file's columns ``positions`` (from 0): ``1,3-5``."""
    runs = []  # [first, last], from 1
    for p in positions:
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + 1
        else:
            runs.append([p + 1, p + 1])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# -- .csv --------------------------------------------------------------------


def _read_csv(path, header=None, columns=None):
    """Numbers of a comma-separated file, with or without a header row.

    ``header=True`` takes the first row as the header and ``False`` as data.
    ``None`` takes it as the header only when none of its fields is a number
    and a later row has one (see :func:`_is_header`): a data row with a bad
    field, ``NA,2`` or ``1,``, is reported, never dropped. With
    ``columns``, only those fields of each row are read (see
    :func:`_select_fields`): the others may hold text. Without, the columns
    of text (:func:`_text_columns`) are left out, with a note. Returns
    ``(X, names, positions)``: ``names`` ``None`` without a header, and
    ``positions`` the file's columns (from 0) that ``X`` holds.
    """
    rows = []
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            records, positions = _records(csv.reader(f)), None
            if columns is not None:
                records, header, positions = _select_fields(
                    records, columns, header, path
                )
            records, names = _split_header(records, header)
            n_columns = None if names is None else len(names)
            keep, left_out = None, None
            for line_num, fields in records:
                line = f"{path}, line {line_num}"
                if n_columns is not None and len(fields) != n_columns:
                    plural = "" if len(fields) == 1 else "s"
                    raise CLIError(
                        f"{line}: {len(fields)} field{plural}, expected {n_columns}"
                    )
                if keep is None:
                    keep, left_out = _kept_fields(path, fields, names, columns is None)
                    if positions is None:
                        positions = keep
                    else:
                        positions = [positions[i] for i in keep]
                    kept_names = None if names is None else [names[i] for i in keep]
                rows.append(
                    _row_values([fields[i] for i in keep], line, kept_names, positions)
                )
                n_columns = len(fields)
    except UnicodeDecodeError:
        raise CLIError(f"cannot read {path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise CLIError(f"cannot read {path}: {exc}") from None
    if not rows:
        raise CLIError(f"{path}: no data rows")
    # Said once the file is read: an error in it is the only line printed.
    if left_out:
        note(left_out)
    return np.array(rows, dtype=np.float64), kept_names, positions


def _kept_fields(path, fields, names, drop_text):
    """Return the indices of the fields of each row to read, from the first row.

    With ``drop_text``, the columns of text (:func:`_text_columns`) are
    left out, unless no column would be left (the first field that is not a
    number is then reported). Returns ``(indices, note)``, the note naming
    the columns left out (``None`` if none).
    """
    text = _text_columns(fields) if drop_text else []
    if len(text) == len(fields):
        text = []
    keep = [i for i in range(len(fields)) if i not in text]
    if not text:
        return keep, None
    described = ", ".join(
        f"{i + 1}" + (f" ({names[i]})" if names is not None and names[i] else "")
        for i in text
    )
    examples = ", ".join(repr(fields[i].strip()) for i in text[:3])
    return keep, (
        f"left out column{'s' if len(text) > 1 else ''} {described} of {path}: "
        f"text ({examples}{', ...' if len(text) > 3 else ''}); "
        f"--columns {_ranges(keep)} chooses the columns"
    )


# Fields that stand for a missing value: not text, a number left out.
MISSING = ("na", "n/a", "#n/a", "nan", "null", "none", "missing", "-", "?")


def _text_columns(fields):
    """Return the indices of the fields of a data row that are text, not numbers.

    A field is text when it is not a number, holds a letter and does not
    stand for a missing value (``NA``, ``null``, ...): a name (``s000``), a
    species. A column is text when its field in the first data row is:
    its later fields are not read. A field like ``NA`` or ``1.2.3`` in a
    column of numbers stays an error.
    """
    return [
        i
        for i, field in enumerate(fields)
        if not _is_number(field)
        and any(c.isalpha() for c in field)
        and field.strip().lower() not in MISSING
    ]


def _records(reader):
    """``(line number, fields)`` of each row of ``reader`` that is not blank."""
    return (
        (reader.line_num, fields)
        for fields in reader
        if any(field.strip() for field in fields)
    )


def _select_fields(records, columns, header, path):
    """Keep the fields ``columns`` names in each of ``records``.

    Returns ``(records, header, positions)``, ``positions`` the indices of
    the fields kept. Names refer to the header, so they make the first row
    the header (an error with ``header=False``); positions alone leave
    ``header`` to be decided on the selected fields. Every row must have the
    first row's number of fields.
    """
    first = next(records, None)
    if first is None:
        return iter(()), header, None
    by_name = [c for c in columns if isinstance(c, str)]
    if by_name and header is False:
        raise CLIError(
            f"--columns {by_name[0]}: a name needs a header, and --no-header "
            "says the first row is data (select by position, from 1)"
        )
    header = True if by_name else header
    n_columns = len(first[1])
    names = [field.strip() for field in first[1]] if header is not False else None
    keep = _column_indices(columns, names, n_columns, path)

    def selected():
        for line_num, fields in itertools.chain([first], records):
            if len(fields) != n_columns:
                plural = "" if len(fields) == 1 else "s"
                raise CLIError(
                    f"{path}, line {line_num}: {len(fields)} field{plural}, "
                    f"expected {n_columns}"
                )
            yield line_num, [fields[i] for i in keep]

    return selected(), header, keep


def _column_indices(columns, names, n_columns, path):
    """Return the indices (from 0) of ``columns``: names or positions from 1.

    ``names`` is ``None`` without a header, where only positions select.
    """
    indices = []
    for column in columns:
        if isinstance(column, str):
            if names is None:
                raise CLIError(
                    f"--columns {column}: {path} has no header to name columns "
                    "(select by position, from 1)"
                )
            if column not in names:
                shown = ", ".join(repr(name) for name in names[:10])
                more = ", ..." if len(names) > 10 else ""
                raise CLIError(
                    f"--columns {column}: no column {column!r} in the header of "
                    f"{path} ({shown}{more})"
                )
            index = names.index(column)
        elif column > n_columns:
            raise CLIError(
                f"--columns {column}: {path} has {n_columns} "
                f"column{'' if n_columns == 1 else 's'}"
            )
        else:
            index = column - 1
        if index in indices:
            raise CLIError(f"--columns: column {index + 1} of {path} is selected twice")
        indices.append(index)
    return indices


def _split_header(records, header):
    """Split ``records`` into the header and the data records.

    ``records`` iterates ``(line number, fields)`` over the rows that are not
    blank. Returns ``(records, names)``: an iterator of the data records
    and the header's field names (``None`` without a header). With
    ``header=None`` the file decides (:func:`_is_header`). Rows are read
    lazily, as the caller iterates ``records``.
    """
    first = next(records, None)
    if header is None and first is not None:
        header, read = _is_header(first[1], records)
        records = itertools.chain(read, records)
    names = None
    if header and first is not None:
        names = [field.strip() for field in first[1]]
    elif first is not None:
        records = itertools.chain([first], records)
    return records, names


def _row_values(fields, line, names, positions):
    """Return the numbers of one data row; a :class:`CLIError` names ``line``.

    ``names`` are the header's names of ``fields`` (``None`` without a
    header) and ``positions`` the columns of the file they are.
    """
    values = _parse_numbers(fields)
    if values is None:
        raise CLIError(f"{line}: {_first_non_number(fields, names, positions)}")
    if not all(math.isfinite(v) for v in values):
        raise CLIError(f"{line}: NaN or infinite value")
    return values


def _is_header(fields, records):
    """Whether the first row ``fields`` is a header; and the next row read.

    A header has no field that is a number, and some later row has one (a
    row of numbers, or of numbers and text) (or no row follows: a header
    alone, reported as "no data rows"). ``records`` is read up to that
    row, but only the row after the first is returned, to be read again:
    when it has no number it is an error whichever the first row is, and
    reading stops there. So a file of text is scanned, not held in memory.
    """
    if any(_is_number(field) for field in fields):
        return False, []
    second = next(records, None)
    if second is None:
        return True, []
    if any(_is_number(field) for field in second[1]):
        return True, [second]
    later = any(any(_is_number(field) for field in r[1]) for r in records)
    return later, [second]


def _is_number(field):
    try:
        float(field)
    except ValueError:
        return False
    return True


def _parse_numbers(fields):
    try:
        return [float(field) for field in fields]
    except ValueError:
        return None


def _first_non_number(fields, names, positions=None):
    for i, field in enumerate(fields):
        try:
            float(field)
        except ValueError:
            column = f"column {(i if positions is None else positions[i]) + 1}"
            if names is not None and i < len(names) and names[i]:
                column += f" ({names[i]})"
            what = "empty field" if not field.strip() else f"{field.strip()!r}"
            hint = ""
            if ";" in field or "\t" in field:
                hint = " (fields are separated by commas)"
            return f"{column}: {what} is not a number{hint}"
    return "not a number"  # pragma: no cover - _parse_numbers failed somewhere


# -- .npy --------------------------------------------------------------------


def _read_npy(path):
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            raise CLIError(f"{path}: not a .npy file")
        f.seek(0)
        try:
            X = np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, EOFError) as exc:
            raise CLIError(f"cannot read {path}: {exc}") from None
    if X.dtype.kind not in "biuf":
        raise CLIError(f"{path}: non-numeric array of dtype {X.dtype}")
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise CLIError(f"{path}: expected a 1-D or 2-D array, got {X.ndim}-D")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise CLIError(f"{path}: empty array of shape {X.shape}")
    return X.astype(np.float64, copy=False), None


# -- outputs, checked before the work ----------------------------------------


def same_file(a, b):
    """Whether paths ``a`` and ``b`` name the same file, existing or not."""
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def check_output(path, option, args):
    """Refuse an output ``path`` of ``option`` that cannot or should not be written.

    It must be a ``.csv`` in an existing directory, with a name the file
    system accepts, not a directory, and neither the input file nor a
    read-only file unless ``args.force``.
    """
    if os.path.splitext(path)[1].lower() != ".csv":
        raise CLIError(f"{option} {path}: unknown extension; outputs are .csv files")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CLIError(f"{option} {path}: directory {directory} does not exist")
    # Found now rather than when the output is written, after the work.
    size, limit = len(os.fsencode(os.path.basename(path))), name_max(directory)
    if size > limit:
        raise CLIError(
            f"{option} {path}: file name too long ({size} bytes; the file "
            f"system of {directory} allows {limit})"
        )
    if os.path.isdir(path):
        raise CLIError(f"{option} {path}: is a directory")
    if same_file(path, args.input) and not args.force:
        raise CLIError(
            f"{option} {path} is the input file; pass --force to overwrite it"
        )
    check_replaceable(path, f"{option} {path}", args.force)


def check_replaceable(path, what, force):
    """Refuse to replace an existing read-only file ``path`` without --force.

    The directory decides whether ``os.replace`` may replace a file, not the
    file's own permissions: a file made read-only to protect it would be
    replaced silently. The mode bits are checked as well as ``os.access``,
    which is always true for root.
    """
    if force or not os.path.exists(path):
        return
    if not os.access(path, os.W_OK) or not os.stat(path).st_mode & 0o222:
        raise CLIError(f"{what} is read-only; pass --force to replace it")
