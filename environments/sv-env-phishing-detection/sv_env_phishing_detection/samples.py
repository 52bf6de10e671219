"""Generator of the bundled SAMPLE emails (synthetic, seeded, deterministic).

Not real mail: every row is labelled `sample: true`. Phishing campaigns (credential
harvest, invoice fraud, delivery notice, CEO fraud) use lookalike / punycode / blocklisted
domains, Reply-To mismatches, urgency, credential requests, risky attachments and URL
shorteners; benign mail is transactional. Both sides include hard cases (a CEO-fraud mail
with no technical signal; a genuine security alert with urgent wording, a newsletter with
a shortened link, a colleague's .zip). Languages: en, de, es, fr.

Run `python -m sv_env_phishing_detection.samples` to rewrite data/sample.jsonl.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sv_env_phishing_detection.emails import render_email_question

LANGUAGES = ("en", "de", "es", "fr")

T: dict[str, dict[str, Any]] = {
    "en": {
        "hi": "Dear customer,",
        "bye": "Kind regards,",
        "urgency": [
            "Urgent: action required",
            "Act immediately",
            "within 24 hours",
            "your account will be suspended",
            "final notice",
        ],
        "soft_urgency": ["at your earliest convenience", "before end of day"],
        "cred": ["verify your password", "confirm your login details", "enter your credentials"],
        "sec_subject": "Security alert for your account",
        "inv_subject": "Invoice {n} overdue",
        "del_subject": "Your parcel could not be delivered",
        "ceo_subject": "Quick favour",
        "ceo_body": "I need you to process a wire transfer of {amt} EUR to a new supplier today. "
        "I am in meetings, reply by email only.",
        "ceo_hard": "Can you handle a payment of {amt} EUR for the new supplier? Details below. Thanks.",
        "order": "Thank you for your order {n}. Your receipt is attached.",
        "order_subject": "Your order {n}",
        "ship": "Your parcel {n} is on its way. Track it here:",
        "ship_subject": "Shipment {n} dispatched",
        "reset": "You requested a password reset. If this was you, use the link below. If not, ignore this email.",
        "reset_subject": "Password reset request",
        "news": "Our monthly newsletter: read the highlights",
        "news_subject": "Monthly newsletter",
        "colleague": "Here are the project files we discussed.",
        "colleague_subject": "Project files",
        "it": "Your password expires within 24 hours. Change it in the usual portal.",
        "it_subject": "Password expiry",
        "click": "Click here:",
        "pay": "Please pay the attached invoice.",
        "del": "Pay the customs fee to reschedule delivery:",
    },
    "de": {
        "hi": "Sehr geehrter Kunde,",
        "bye": "Mit freundlichen Grüßen,",
        "urgency": [
            "Dringend: Handlung erforderlich",
            "sofort",
            "innerhalb von 24 Stunden",
            "Ihr Konto wird gesperrt",
            "letzte Mahnung",
        ],
        "soft_urgency": ["so bald wie möglich", "bis heute Abend"],
        "cred": [
            "bestätigen Sie Ihr Passwort",
            "geben Sie Ihre Zugangsdaten ein",
            "melden Sie sich an und bestätigen Sie Ihre Daten",
        ],
        "sec_subject": "Sicherheitswarnung zu Ihrem Konto",
        "inv_subject": "Rechnung {n} überfällig",
        "del_subject": "Ihr Paket konnte nicht zugestellt werden",
        "ceo_subject": "Kurze Bitte",
        "ceo_body": "Bitte überweisen Sie heute {amt} EUR an einen neuen Lieferanten. Ich bin in Meetings, "
        "antworten Sie nur per E-Mail.",
        "ceo_hard": "Kannst du die Zahlung von {amt} EUR für den neuen Lieferanten übernehmen? Danke.",
        "order": "Vielen Dank für Ihre Bestellung {n}. Die Rechnung finden Sie im Anhang.",
        "order_subject": "Ihre Bestellung {n}",
        "ship": "Ihr Paket {n} ist unterwegs. Sendungsverfolgung:",
        "ship_subject": "Sendung {n} versandt",
        "reset": "Sie haben das Zurücksetzen Ihres Passworts angefordert. Falls nicht, ignorieren Sie diese E-Mail.",
        "reset_subject": "Passwort zurücksetzen",
        "news": "Unser monatlicher Newsletter: die Highlights",
        "news_subject": "Newsletter",
        "colleague": "Anbei die Projektdateien wie besprochen.",
        "colleague_subject": "Projektdateien",
        "it": "Ihr Passwort läuft innerhalb von 24 Stunden ab. Ändern Sie es im üblichen Portal.",
        "it_subject": "Passwortablauf",
        "click": "Hier klicken:",
        "pay": "Bitte begleichen Sie die beigefügte Rechnung.",
        "del": "Zahlen Sie die Zollgebühr, um die Zustellung neu zu planen:",
    },
    "es": {
        "hi": "Estimado cliente:",
        "bye": "Saludos cordiales,",
        "urgency": [
            "Urgente: se requiere acción",
            "inmediatamente",
            "en 24 horas",
            "su cuenta será suspendida",
            "último aviso",
        ],
        "soft_urgency": ["lo antes posible", "antes del final del día"],
        "cred": ["verifique su contraseña", "confirme sus datos de acceso", "introduzca sus credenciales"],
        "sec_subject": "Alerta de seguridad de su cuenta",
        "inv_subject": "Factura {n} vencida",
        "del_subject": "No pudimos entregar su paquete",
        "ceo_subject": "Un favor rápido",
        "ceo_body": "Necesito que hagas hoy una transferencia de {amt} EUR a un nuevo proveedor. Estoy en reuniones, "
        "responde solo por correo.",
        "ceo_hard": "¿Puedes gestionar un pago de {amt} EUR al nuevo proveedor? Gracias.",
        "order": "Gracias por su pedido {n}. Adjuntamos el recibo.",
        "order_subject": "Su pedido {n}",
        "ship": "Su paquete {n} está en camino. Siga el envío aquí:",
        "ship_subject": "Envío {n} en camino",
        "reset": "Ha solicitado restablecer su contraseña. Si no fue usted, ignore este correo.",
        "reset_subject": "Restablecer contraseña",
        "news": "Nuestro boletín mensual: lo más destacado",
        "news_subject": "Boletín mensual",
        "colleague": "Aquí están los archivos del proyecto que comentamos.",
        "colleague_subject": "Archivos del proyecto",
        "it": "Su contraseña caduca en 24 horas. Cámbiela en el portal habitual.",
        "it_subject": "Caducidad de contraseña",
        "click": "Haga clic aquí:",
        "pay": "Por favor, pague la factura adjunta.",
        "del": "Pague la tasa de aduana para reprogramar la entrega:",
    },
    "fr": {
        "hi": "Cher client,",
        "bye": "Cordialement,",
        "urgency": [
            "Urgent : action requise",
            "immédiatement",
            "sous 24 heures",
            "votre compte sera suspendu",
            "dernier avis",
        ],
        "soft_urgency": ["dès que possible", "avant ce soir"],
        "cred": [
            "confirmez votre mot de passe",
            "saisissez vos identifiants",
            "vérifiez vos informations de connexion",
        ],
        "sec_subject": "Alerte de sécurité sur votre compte",
        "inv_subject": "Facture {n} impayée",
        "del_subject": "Votre colis n'a pas pu être livré",
        "ceo_subject": "Petit service",
        "ceo_body": "J'ai besoin que tu fasses aujourd'hui un virement de {amt} EUR à un nouveau fournisseur. "
        "Je suis en réunion, réponds uniquement par e-mail.",
        "ceo_hard": "Peux-tu t'occuper d'un paiement de {amt} EUR pour le nouveau fournisseur ? Merci.",
        "order": "Merci pour votre commande {n}. Votre reçu est en pièce jointe.",
        "order_subject": "Votre commande {n}",
        "ship": "Votre colis {n} est en route. Suivez-le ici :",
        "ship_subject": "Colis {n} expédié",
        "reset": "Vous avez demandé la réinitialisation de votre mot de passe. Sinon, ignorez cet e-mail.",
        "reset_subject": "Réinitialisation du mot de passe",
        "news": "Notre lettre mensuelle : les temps forts",
        "news_subject": "Lettre d'information",
        "colleague": "Voici les fichiers du projet dont nous avons parlé.",
        "colleague_subject": "Fichiers du projet",
        "it": "Votre mot de passe expire sous 24 heures. Changez-le sur le portail habituel.",
        "it_subject": "Expiration du mot de passe",
        "click": "Cliquez ici :",
        "pay": "Merci de régler la facture jointe.",
        "del": "Payez les frais de douane pour reprogrammer la livraison :",
    },
}

BANKS = {
    "en": ["paypal.com", "chase.com", "microsoft.com", "apple.com"],
    "de": ["sparkasse.de", "paypal.com", "commerzbank.de"],
    "es": ["santander.es", "bbva.es", "caixabank.es"],
    "fr": ["creditagricole.fr", "societegenerale.fr", "paypal.com"],
}
CARRIERS = {
    "en": ["dhl.com", "fedex.com", "ups.com"],
    "de": ["dhl.de", "dpd.de"],
    "es": ["correos.es"],
    "fr": ["laposte.fr", "chronopost.fr"],
}
SHOPS = {"en": "amazon.com", "de": "amazon.de", "es": "amazon.es", "fr": "amazon.fr"}
COMPANY = {"en": "northwind-corp.com", "de": "musterfirma.de", "es": "empresa-ejemplo.es", "fr": "societe-exemple.fr"}
BLOCKED = ["secure-login-verify.top", "account-update-center.xyz", "wallet-unlock-support.ru"]
SHORT = ["bit.ly", "tinyurl.com", "cutt.ly", "is.gd"]
RISKY = ["exe", "html", "zip", "docm", "xlsm", "iso"]
_CYR = {"a": "а", "e": "е", "o": "о", "p": "р", "c": "с"}


def lookalike(rng: random.Random, brand: str) -> str:
    """A lookalike host for `brand` (digit swap, rn->m, punycode homoglyph, combosquat, subdomain)."""
    label, _, tld = brand.partition(".")
    kind = rng.choice(["digit", "rnm", "punycode", "combo", "subdomain", "blocked"])
    if kind == "digit" and ("l" in label or "o" in label):
        return (label.replace("l", "1", 1) if "l" in label else label.replace("o", "0", 1)) + "." + tld
    if kind == "rnm" and "m" in label:
        return label.replace("m", "rn", 1) + "." + tld
    if kind == "punycode" and any(c in label for c in _CYR):
        i = next(i for i, c in enumerate(label) if c in _CYR)
        uni = label[:i] + _CYR[label[i]] + label[i + 1 :]
        return uni.encode("idna").decode("ascii") + "." + tld
    if kind == "subdomain":
        return f"{brand}.{rng.choice(['verify-account', 'login-check', 'kunden-service'])}.{rng.choice(['ru', 'top', 'info'])}"
    if kind == "blocked":
        return rng.choice(BLOCKED)
    return f"{label}-{rng.choice(['secure', 'support', 'verify', 'login'])}.{rng.choice(['com', 'net', 'info'])}"


def _n(rng: random.Random) -> str:
    return f"{rng.randint(100000, 999999)}"


def credential_harvest(rng, lang):
    t, brand = T[lang], rng.choice(BANKS[lang])
    host = lookalike(rng, brand)
    url = f"https://{host}/{rng.choice(['login', 'verify', 'secure/update'])}?id={_n(rng)}"
    if rng.random() < 0.25:
        url = f"https://{rng.choice(SHORT)}/{_n(rng)}"
    urg, cred = rng.choice(t["urgency"]), rng.choice(t["cred"])
    body = (
        f"{t['hi']}\n\n{urg.capitalize()}: {cred}. {t['click']} {url}\n\n{t['bye']}\n{brand.split('.')[0].capitalize()}"
    )
    return {
        "from": f"{brand.split('.')[0].capitalize()} <no-reply@{host if '/' not in host else brand}>",
        "subject": t["sec_subject"],
        "body": body,
        "links": [url],
        "attachments": [],
    }, False


def invoice_fraud(rng, lang):
    t = T[lang]
    vendor = rng.choice(["office-supplies", "logistik-partner", "suministros", "fournitures"]) + rng.choice(
        [".com", ".net", ".eu"]
    )
    att = f"{rng.choice(['Invoice', 'Rechnung', 'Factura', 'Facture'])}_{_n(rng)}.{rng.choice(RISKY)}"
    reply = f"billing{rng.randint(1, 99)}@{rng.choice(['gmail.com', 'outlook.com', 'mail.ru', 'proton.me'])}"
    urg = rng.choice(t["urgency"])
    body = f"{t['hi']}\n\n{t['pay']} {urg}.\n\n{t['bye']}"
    return {
        "from": f"Accounts <accounts@{vendor}>",
        "reply_to": reply,
        "subject": t["inv_subject"].format(n=_n(rng)),
        "body": body,
        "links": [],
        "attachments": [att],
    }, False


def delivery_notice(rng, lang):
    t, carrier = T[lang], rng.choice(CARRIERS[lang])
    host = lookalike(rng, carrier)
    url = f"https://{rng.choice(SHORT)}/{_n(rng)}" if rng.random() < 0.5 else f"http://{host}/track/{_n(rng)}"
    atts = [f"label_{_n(rng)}.{rng.choice(['html', 'zip', 'exe'])}"] if rng.random() < 0.4 else []
    body = f"{t['hi']}\n\n{t['del']} {url}\n{rng.choice(t['urgency'])}.\n\n{t['bye']}"
    return {
        "from": f"{carrier.split('.')[0].upper()} <notice@{host}>",
        "subject": t["del_subject"],
        "body": body,
        "links": [url],
        "attachments": atts,
    }, False


def ceo_fraud(rng, lang):
    t, company = T[lang], COMPANY[lang]
    name = rng.choice(["Laura Weber", "Carlos Ruiz", "Claire Martin", "John Miller"])
    amt = f"{rng.randint(12, 95) * 1000:,}"
    user = name.lower().replace(" ", ".")
    if rng.random() < 0.35:  # hard: free-mail sender, no urgency phrase, no reply-to, no link
        return {
            "from": f"{name} <{user}.{rng.randint(1, 99)}@gmail.com>",
            "to": f"finance@{company}",
            "subject": t["ceo_subject"],
            "body": t["ceo_hard"].format(amt=amt) + f" {rng.choice(t['soft_urgency'])}.",
            "links": [],
            "attachments": [],
        }, True
    label, _, tld = company.partition(".")
    spoof = label.replace("o", "0", 1) if "o" in label else label + "-group"
    return {
        "from": f"{name} <{user}@{spoof}.{tld}>",
        "reply_to": f"{user}.ceo@{rng.choice(['gmail.com', 'outlook.com'])}",
        "to": f"finance@{company}",
        "subject": t["ceo_subject"],
        "body": f"{t['ceo_body'].format(amt=amt)} {rng.choice(t['urgency'])}.\n{name}",
        "links": [],
        "attachments": [],
    }, False


def legit_order(rng, lang):
    t, shop, n = T[lang], SHOPS[lang], _n(rng)
    url = f"https://www.{shop}/orders/{n}"
    return {
        "from": f"{shop.split('.')[0].capitalize()} <order-update@{shop}>",
        "subject": t["order_subject"].format(n=n),
        "body": f"{t['hi']}\n\n{t['order'].format(n=n)}\n{url}\n\n{t['bye']}",
        "links": [url],
        "attachments": [f"receipt_{n}.pdf"],
    }, False


def legit_shipping(rng, lang):
    t, carrier, n = T[lang], rng.choice(CARRIERS[lang]), _n(rng)
    url = f"https://www.{carrier}/tracking?id={n}"
    return {
        "from": f"{carrier.split('.')[0].upper()} <noreply@{carrier}>",
        "subject": t["ship_subject"].format(n=n),
        "body": f"{t['hi']}\n\n{t['ship'].format(n=n)} {url}\n\n{t['bye']}",
        "links": [url],
        "attachments": [],
    }, False


def legit_reset(rng, lang):  # hard-ish: mentions passwords, but a real domain and no request for them
    t, brand = T[lang], rng.choice(["google.com", "microsoft.com", "dropbox.com"])
    url = f"https://accounts.{brand}/reset?token={_n(rng)}"
    return {
        "from": f"{brand.split('.')[0].capitalize()} <no-reply@accounts.{brand}>",
        "subject": t["reset_subject"],
        "body": f"{t['reset']}\n{url}",
        "links": [url],
        "attachments": [],
    }, False


def legit_newsletter(rng, lang):  # hard: a shortened link in genuine mail
    t, company = T[lang], COMPANY[lang]
    url = f"https://{rng.choice(SHORT)}/{_n(rng)}"
    return {
        "from": f"News <news@{company}>",
        "subject": t["news_subject"],
        "body": f"{t['news']}: {url}",
        "links": [url, f"https://www.{company}/unsubscribe"],
        "attachments": [],
    }, True


def legit_colleague(rng, lang):  # hard: a .zip from a colleague on the same domain
    t, company = T[lang], COMPANY[lang]
    return {
        "from": f"Sam Becker <sam.becker@{company}>",
        "to": f"team@{company}",
        "subject": t["colleague_subject"],
        "body": f"{t['colleague']}\n\n{t['bye']}\nSam",
        "links": [],
        "attachments": [f"project_{_n(rng)}.zip", "notes.pdf"],
    }, True


def legit_it_notice(rng, lang):  # hard: urgent wording from the real IT department, reply-to helpdesk
    t, company = T[lang], COMPANY[lang]
    return {
        "from": f"IT <it@{company}>",
        "reply_to": f"helpdesk@support.{company}",
        "to": f"staff@{company}",
        "subject": t["it_subject"],
        "body": t["it"],
        "links": [f"https://portal.{company}/password"],
        "attachments": [],
    }, True


def legit_vendor_reminder(rng, lang):  # hard: real dunning letter, billing handled by a helpdesk domain
    t, n = T[lang], _n(rng)
    vendor = rng.choice(["acme-tools.com", "werkzeug-handel.de", "papeleria-central.es", "bureau-direct.fr"])
    return {
        "from": f"Billing <billing@{vendor}>",
        "reply_to": f"support@{vendor.split('.')[0]}.zendesk.com",
        "subject": t["inv_subject"].format(n=n),
        "body": f"{t['hi']}\n\n{t['urgency'][4].capitalize()}: {t['pay']}\n\n{t['bye']}",
        "links": [],
        "attachments": [f"invoice_{n}.pdf"],
    }, True


SCENARIOS: dict[str, tuple[str, Callable[[random.Random, str], tuple[dict, bool]], float]] = {
    "credential_harvest": ("Phishing", credential_harvest, 3),
    "invoice_fraud": ("Phishing", invoice_fraud, 2),
    "delivery_notice": ("Phishing", delivery_notice, 2),
    "ceo_fraud": ("Phishing", ceo_fraud, 2),
    "legit_order": ("Legitimate", legit_order, 2.5),
    "legit_shipping": ("Legitimate", legit_shipping, 2),
    "legit_reset": ("Legitimate", legit_reset, 1.5),
    "legit_newsletter": ("Legitimate", legit_newsletter, 1),
    "legit_colleague": ("Legitimate", legit_colleague, 1),
    "legit_it_notice": ("Legitimate", legit_it_notice, 1),
    "legit_vendor_reminder": ("Legitimate", legit_vendor_reminder, 1.5),
}


def sample_emails(n: int = 160, seed: int = 4) -> list[dict[str, Any]]:
    """`n` rows in the common JSONL shape {"id", "question", "answer", "info"}; languages
    rotate so each gets n/4 rows."""
    rng = random.Random(seed)
    names = list(SCENARIOS)
    weights = [SCENARIOS[name][2] for name in names]
    rows = []
    for i in range(n):
        lang = LANGUAGES[i % len(LANGUAGES)]
        name = rng.choices(names, weights)[0]
        label, make, _ = SCENARIOS[name]
        email, hard = make(rng, lang)
        email = {"from": "", "reply_to": "", "to": "", **email}
        rows.append(
            {
                "id": f"e4-sample-{i:04d}",
                "question": render_email_question(email),
                "answer": label,
                "info": {"sample": True, "language": lang, "scenario": name, "hard": hard, "email": email},
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


if __name__ == "__main__":
    write_jsonl(Path(__file__).parent / "data" / "sample.jsonl", sample_emails())
