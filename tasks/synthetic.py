"""Generated French clinical text for the offline demo: the project's own templates and small lexicons,
no third-party text. Deterministic per seed.

- demo-cls: specialty of a short note (5 classes); notes borrow terms from other specialties and 5% of
  labels are flipped, so it is learnable but not trivial.
- demo-multilabel: problem categories a note mentions; negated mentions ("pas de fièvre") do not count.
- demo-ner: DRUG, DOSE, SYMPTOM, DISEASE, ANATOMY character spans, with ANATOMY nested inside DISEASE
  ("cancer du poumon").
- demo_corpus: unlabelled documents of a few hundred words for the offline pretraining demo.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from biobench.errors import ConfigError
from biobench.tasks.schema import ClassificationExample, Entity, MultilabelExample, NerExample

DRUGS = ["paracétamol", "amoxicilline", "ibuprofène", "métformine", "furosémide", "bisoprolol", "héparine",
         "oméprazole", "prednisone", "morphine", "aspirine", "lévothyroxine", "insuline", "amlodipine"]
DOSES = ["500 mg", "1 g", "20 mg", "40 mg", "5 mg", "75 mg", "10 UI", "2,5 mg", "100 mg", "250 mg"]
FREQ = ["deux fois par jour", "trois fois par jour", "le matin", "le soir", "toutes les six heures"]
ANATOMY = ["poumon", "foie", "rein", "côlon", "sein", "pancréas", "estomac", "genou", "cerveau", "cœur"]
DISEASE_HEADS = ["cancer du", "tumeur du", "lésion du", "kyste du"]
SIMPLE_DISEASES = ["diabète de type 2", "hypertension artérielle", "pneumopathie", "insuffisance cardiaque",
                   "asthme", "épilepsie", "polyarthrite rhumatoïde", "cirrhose", "migraine", "arthrose"]

SPECIALTIES: dict[str, dict[str, list[str]]] = {
    "cardiologie": {"sym": ["douleur thoracique", "palpitations", "œdèmes des membres inférieurs", "dyspnée d'effort"],
                    "dis": ["insuffisance cardiaque", "fibrillation auriculaire", "hypertension artérielle", "infarctus du myocarde"],
                    "drug": ["bisoprolol", "furosémide", "amlodipine", "aspirine"],
                    "exam": ["électrocardiogramme", "échographie cardiaque", "dosage de la troponine"]},
    "pneumologie": {"sym": ["toux", "dyspnée", "expectorations", "sifflements"],
                    "dis": ["asthme", "pneumopathie", "bronchopneumopathie chronique obstructive", "embolie pulmonaire"],
                    "drug": ["salbutamol", "amoxicilline", "prednisone", "budésonide"],
                    "exam": ["radiographie thoracique", "spirométrie", "scanner thoracique"]},
    "neurologie": {"sym": ["céphalées", "vertiges", "troubles de la marche", "paresthésies"],
                   "dis": ["épilepsie", "migraine", "accident vasculaire cérébral", "sclérose en plaques"],
                   "drug": ["lévétiracétam", "valproate", "triptan", "aspirine"],
                   "exam": ["IRM cérébrale", "électroencéphalogramme", "ponction lombaire"]},
    "gastro-entérologie": {"sym": ["douleurs abdominales", "nausées", "diarrhée", "rectorragies"],
                           "dis": ["cirrhose", "maladie de Crohn", "reflux gastro-œsophagien", "pancréatite"],
                           "drug": ["oméprazole", "lopéramide", "mésalazine", "paracétamol"],
                           "exam": ["coloscopie", "fibroscopie œso-gastro-duodénale", "échographie abdominale"]},
    "rhumatologie": {"sym": ["douleurs articulaires", "raideur matinale", "gonflement du genou", "lombalgies"],
                     "dis": ["polyarthrite rhumatoïde", "arthrose", "goutte", "spondylarthrite"],
                     "drug": ["méthotrexate", "ibuprofène", "colchicine", "prednisone"],
                     "exam": ["radiographie des mains", "dosage de la CRP", "échographie articulaire"]},
}
CATEGORIES: dict[str, list[str]] = {
    "infection": ["fièvre", "frissons", "syndrome inflammatoire", "infection urinaire"],
    "douleur": ["douleur thoracique", "douleurs abdominales", "céphalées", "lombalgies"],
    "cardiovasculaire": ["hypertension artérielle", "palpitations", "insuffisance cardiaque", "œdèmes"],
    "métabolique": ["diabète de type 2", "hypercholestérolémie", "obésité", "hypothyroïdie"],
    "respiratoire": ["toux", "dyspnée", "asthme", "désaturation"],
}
OPENERS = ["Patient de {age} ans", "Patiente de {age} ans", "Homme de {age} ans", "Femme de {age} ans"]
FILLERS = ["Pas d'antécédent chirurgical notable.", "Le patient vit seul à domicile.", "Examen clinique par ailleurs normal.",
           "Bilan biologique en cours.", "Revu en consultation dans trois mois.", "Pas d'allergie connue.",
           "L'évolution est favorable.", "Le traitement est bien toléré."]
NEGATIONS = ["pas de {}", "absence de {}", "aucun signe de {}", "ne rapporte pas de {}"]


class _Text:
    """Builds a text piece by piece and records entity spans (nested spans come from `span()`)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.entities: list[Entity] = []

    def add(self, piece: str, label: str | None = None) -> tuple[int, int]:
        start = self.length
        self.parts.append(piece)
        self.length += len(piece)
        if label:
            self.entities.append(Entity(start, self.length, label))
        return start, self.length

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _note_cls(rng: random.Random, label: str) -> str:
    spec = SPECIALTIES[label]
    other = SPECIALTIES[rng.choice([s for s in SPECIALTIES if s != label])]

    def pick(key: str) -> str:  # 20% of terms come from another specialty
        return rng.choice((other if rng.random() < 0.2 else spec)[key])

    sentences = [
        f"{rng.choice(OPENERS).format(age=rng.randint(18, 90))} consultant pour {pick('sym')}.",
        f"Antécédents : {rng.choice(SIMPLE_DISEASES)}.",
        f"On retient le diagnostic de {pick('dis')}.",
        f"Réalisation d'un(e) {pick('exam')}.",
        f"Traitement par {pick('drug')} {rng.choice(DOSES)} {rng.choice(FREQ)}.",
        rng.choice(FILLERS),
    ]
    head, tail = sentences[:1], sentences[1:]
    rng.shuffle(tail)
    return " ".join(head + tail[: rng.randint(3, 5)])


def _note_multilabel(rng: random.Random) -> tuple[str, tuple[str, ...]]:
    cats = list(CATEGORIES)
    present = rng.sample(cats, rng.randint(1, 3))
    absent = [c for c in cats if c not in present]
    sentences = [f"{rng.choice(OPENERS).format(age=rng.randint(18, 90))} vu en consultation."]
    for c in present:
        sentences.append(rng.choice(["Présente une {}.", "On note {}.", "Signale {} depuis une semaine.", "Suivi pour {}."])
                         .format(rng.choice(CATEGORIES[c])))
    for c in rng.sample(absent, min(len(absent), rng.randint(0, 2))):  # negated: not a label
        sentences.append(rng.choice(NEGATIONS).format(rng.choice(CATEGORIES[c])).capitalize() + ".")
    sentences.append(rng.choice(FILLERS))
    rng.shuffle(sentences)
    labels = set(present)
    if rng.random() < 0.05:  # a little annotation noise
        labels ^= {rng.choice(cats)}
    return " ".join(sentences), tuple(sorted(labels))


def _disease(t: _Text, rng: random.Random) -> None:
    if rng.random() < 0.5:
        start = t.length
        t.add(rng.choice(DISEASE_HEADS) + " ")
        t.add(rng.choice(ANATOMY), "ANATOMY")
        t.entities.append(Entity(start, t.length, "DISEASE"))
    else:
        t.add(rng.choice(SIMPLE_DISEASES), "DISEASE")


def _sentence_ner(rng: random.Random) -> tuple[str, tuple[Entity, ...]]:
    t = _Text()
    form = rng.randrange(5)
    if form == 0:
        t.add(rng.choice(OPENERS).format(age=rng.randint(18, 90)) + " hospitalisé pour ")
        t.add(rng.choice([s for v in SPECIALTIES.values() for s in v["sym"]]), "SYMPTOM")
        t.add(" dans un contexte de ")
        _disease(t, rng)
        t.add(".")
    elif form == 1:
        t.add("Traitement par ")
        t.add(rng.choice(DRUGS), "DRUG")
        t.add(" ")
        t.add(rng.choice(DOSES), "DOSE")
        t.add(f" {rng.choice(FREQ)}.")
    elif form == 2:
        t.add("Le scanner montre une anomalie du ")
        t.add(rng.choice(ANATOMY), "ANATOMY")
        t.add(" évocatrice de ")
        _disease(t, rng)
        t.add(".")
    elif form == 3:
        t.add("Douleur au niveau du ")  # "Douleur" here is not annotated: makes SYMPTOM context-dependent
        t.add(rng.choice(ANATOMY), "ANATOMY")
        t.add(", soulagée par ")
        t.add(rng.choice(DRUGS), "DRUG")
        t.add(".")
    else:
        t.add("Antécédents de ")
        _disease(t, rng)
        t.add(" et de ")
        t.add(rng.choice([s for v in SPECIALTIES.values() for s in v["sym"]]), "SYMPTOM")
        t.add(f", traités par {rng.choice(DOSES)} de ")
        t.add(rng.choice(DRUGS), "DRUG")
        t.add(".")
    return t.text, tuple(sorted(t.entities, key=lambda e: (e.start, e.end, e.label)))


def _make(name: str, rng: random.Random, ex_id: str):
    if name == "demo-cls":
        label = rng.choice(list(SPECIALTIES))
        text = _note_cls(rng, label)
        if rng.random() < 0.05:
            label = rng.choice(list(SPECIALTIES))
        return ClassificationExample(ex_id, text, label)
    if name == "demo-multilabel":
        text, labels = _note_multilabel(rng)
        return MultilabelExample(ex_id, text, labels)
    text, entities = _sentence_ner(rng)
    return NerExample(ex_id, text, entities)


GENERATORS: tuple[str, ...] = ("demo-cls", "demo-multilabel", "demo-ner")
OPTIONS: tuple[str, ...] = ("seed", "n_train", "n_dev", "n_test")  # a generated source's options: generate_task's


def generate_task(
    generator: str, seed: int = 0, n_train: int = 400, n_dev: int = 100, n_test: int = 100
) -> dict[str, list]:
    """Splits of a generated demo task; each split has its own stream so sizes don't shift the others."""
    if generator not in GENERATORS:

        raise ConfigError(f"unknown generator {generator!r}; available: {', '.join(GENERATORS)}")
    out = {}
    for k, (split, n) in enumerate((("train", n_train), ("dev", n_dev), ("test", n_test))):
        rng = random.Random(f"{generator}/{seed}/{k}")
        out[split] = [_make(generator, rng, f"{split}-{i}") for i in range(n)]
    return out


_SENTENCES: tuple[Callable[[random.Random], str], ...] = (
    lambda r: _sentence_ner(r)[0],
    lambda r: _note_cls(r, r.choice(list(SPECIALTIES))),
    lambda r: _note_multilabel(r)[0],
    lambda r: r.choice(FILLERS),
)


def demo_corpus(n_docs: int, seed: int = 0) -> list[str]:
    """Unlabelled French clinical documents of a few hundred words each (offline pretraining demo)."""
    rng = random.Random(f"corpus/{seed}")
    docs = []
    for _ in range(n_docs):
        words: list[str] = []
        target = rng.randint(200, 400)
        while len(words) < target:
            words += rng.choice(_SENTENCES)(rng).split()
        docs.append(" ".join(words))
    return docs
