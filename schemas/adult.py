"""UCI Adult, as used by Del Vasto-Terrientes et al. (ICISSP 2025) §5 (docs/specification.md §3): 45,222 records, 10 released attributes.

Released (all quasi-identifiers): age [0, 100] years and hours-per-week [1, 99] hours (numeric,
declared domains of docs/specification.md §2), and the categorical workclass, education, marital-status,
occupation, relationship, race, sex and native-country, with the categories listed in
``adult.names``. Not released: fnlwgt, education-num, capital-gain, capital-loss, income.
"""
from __future__ import annotations

from .base import Attribute, DatasetSchema

WORKCLASS = ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
             "Without-pay", "Never-worked")
EDUCATION = ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
             "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool")
MARITAL_STATUS = ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                  "Married-spouse-absent", "Married-AF-spouse")
OCCUPATION = ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
              "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
              "Priv-house-serv", "Protective-serv", "Armed-Forces")
RELATIONSHIP = ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried")
RACE = ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black")
SEX = ("Female", "Male")
NATIVE_COUNTRY = ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                  "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                  "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                  "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
                  "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                  "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands")

#: Column order of adult.data / adult.test.
RAW_COLUMNS = ("age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
               "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
               "native-country", "income")

#: The 10 attributes of Del Vasto-Terrientes et al. (ICISSP 2025) §5, in the paper's order.
RELEASED = ("age", "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
            "hours-per-week", "native-country")


def _cat(name: str, categories: tuple[str, ...]) -> Attribute:
    return Attribute(name=name, type="string", role="quasi-identifier", kind="categorical", categories=categories)


SCHEMA = DatasetSchema(
    name="adult",
    description="UCI Adult (Census Income), adult.data + adult.test without records containing '?'",
    attributes=(
        Attribute(name="record_id", type="long", role="id", description="0-based position after cleaning"),
        Attribute(name="age", type="integer", role="quasi-identifier", kind="numeric", domain=(0, 100), unit="years"),
        _cat("workclass", WORKCLASS),
        Attribute(name="fnlwgt", type="integer", role="not-released"),
        _cat("education", EDUCATION),
        Attribute(name="education-num", type="integer", role="not-released"),
        _cat("marital-status", MARITAL_STATUS),
        _cat("occupation", OCCUPATION),
        _cat("relationship", RELATIONSHIP),
        _cat("race", RACE),
        _cat("sex", SEX),
        Attribute(name="capital-gain", type="integer", role="not-released"),
        Attribute(name="capital-loss", type="integer", role="not-released"),
        Attribute(name="hours-per-week", type="integer", role="quasi-identifier", kind="numeric", domain=(1, 99),
                  unit="hours per week"),
        _cat("native-country", NATIVE_COUNTRY),
        Attribute(name="income", type="string", role="not-released"),
    ),
)


#: The two classes of ``income`` (adult.test's trailing '.' stripped).
INCOME = ("<=50K", ">50K")

#: Adult with ``income`` released too (a categorical attribute of two classes): the table a user trains a
#: classifier on, for synthetic releases with ``synthesis_target: income`` (docs/specification.md §10).
SCHEMA_WITH_INCOME = DatasetSchema(
    name="adult-income",
    description=f"{SCHEMA.description}; income released as a categorical attribute",
    attributes=tuple(
        Attribute(name="income", type="string", role="sensitive", kind="categorical", categories=INCOME)
        if a.name == "income" else a for a in SCHEMA.attributes),
)

#: ``adult-income`` over adult.data's rows only (30,162 after cleaning): a release of it leaves adult.test's
#: 15,060 rows out, so a classifier trained on the release can be tested on rows the release never saw
#: (docs/evaluation.md; conf/adult-synthetic.yaml).
SCHEMA_WITH_INCOME_TRAIN = DatasetSchema(
    name="adult-income-train",
    description=("UCI Adult (Census Income), adult.data only (the training file; adult.test held out) without "
                 "records containing '?'; income released as a categorical attribute"),
    attributes=SCHEMA_WITH_INCOME.attributes,
)
