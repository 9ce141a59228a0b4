"""UCI Wine Quality, red + white (6,497 records, 11 released attributes; docs/specification.md §3).

Column names are the UCI names in snake_case (Delta Lake does not allow spaces in column names).
``quality`` and ``color`` are not released.

Two declared schemas:

- ``wine`` (default): domains are public physico-chemical bounds for table wine, fixed without the
  data's extremes: each covers every red and white vinho verde in the dataset with margin.
- ``wine-2max``: the paper's bounds, [0, 2·max], where max is the attribute's maximum over the whole
  *published* UCI dataset. These constants are legitimate only because that dataset is itself
  public; computing 2·max from private data would leak the maximum (docs/specification.md §2), so the project
  never derives a domain from the data at run time. Select it explicitly with ``dataset: wine-2max``.
"""
from __future__ import annotations

from .base import Attribute, DatasetSchema

#: (name as in the UCI files, snake_case name, unit, declared public domain, max over the UCI data)
_ATTRIBUTES = (
    ("fixed acidity", "fixed_acidity", "g(tartaric acid)/dm3", (0.0, 20.0), 15.9),
    ("volatile acidity", "volatile_acidity", "g(acetic acid)/dm3", (0.0, 2.0), 1.58),
    ("citric acid", "citric_acid", "g/dm3", (0.0, 2.0), 1.66),
    ("residual sugar", "residual_sugar", "g/dm3", (0.0, 80.0), 65.8),
    ("chlorides", "chlorides", "g(sodium chloride)/dm3", (0.0, 1.0), 0.611),
    ("free sulfur dioxide", "free_sulfur_dioxide", "mg/dm3", (0.0, 300.0), 289.0),
    ("total sulfur dioxide", "total_sulfur_dioxide", "mg/dm3", (0.0, 500.0), 440.0),
    ("density", "density", "g/cm3", (0.98, 1.04), 1.03898),
    ("pH", "pH", "pH units", (2.5, 4.5), 4.01),
    ("sulphates", "sulphates", "g(potassium sulphate)/dm3", (0.0, 2.5), 2.0),
    ("alcohol", "alcohol", "% vol", (5.0, 16.0), 14.9),
)

#: UCI column name -> released column name.
RENAME = {raw: name for raw, name, *_ in _ATTRIBUTES}
RELEASED = tuple(name for _, name, *_ in _ATTRIBUTES)


def _schema(name: str, twice_max: bool) -> DatasetSchema:
    attrs = [Attribute(name="record_id", type="long", role="id", description="0-based position, red then white")]
    for _, col, unit, domain, mx in _ATTRIBUTES:
        dom = (0.0, 2.0 * mx) if twice_max else domain
        attrs.append(Attribute(name=col, type="double", role="quasi-identifier", kind="numeric", domain=dom, unit=unit))
    attrs.append(Attribute(name="quality", type="integer", role="not-released", description="sensory score 0-10"))
    attrs.append(Attribute(name="color", type="string", role="not-released", description="red or white"))
    desc = "UCI Wine Quality, red + white" + (" with the paper's [0, 2*max] domains" if twice_max else "")
    return DatasetSchema(name=name, description=desc, attributes=tuple(attrs))


SCHEMA = _schema("wine", twice_max=False)
SCHEMA_TWICE_MAX = _schema("wine-2max", twice_max=True)
