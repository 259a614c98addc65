"""The data a browser would post from a rendered page's form: only the fields the page shows.

Posting ``{name: form[name].value() for name in form.fields}`` sends fields a template may have
left out, so a test passes while the real page cannot be saved (the queue form lost its node pool
field that way: every top-level queue outside the default pool answered "Nothing was saved" with
no field marked). Build the post from the HTML instead.
"""

from __future__ import annotations

from html.parser import HTMLParser


class _FormFields(HTMLParser):
    """Each <form>'s successful controls as a browser submits them (no button)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[dict[str, str]] = []
        self.inside = False
        self.data: dict[str, str] = {}
        self._select: str | None = None
        self._first_option: str | None = None
        self._selected = False
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.data, self.inside = {}, True
            self.forms.append(self.data)
            return
        if not self.inside or "disabled" in a:
            return
        name = a.get("name")
        if tag == "input" and name:
            kind = a.get("type", "text")
            if kind in ("submit", "button", "image", "reset", "file"):
                return
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.data[name] = a.get("value", "on")
                return
            self.data[name] = a.get("value", "")
        elif tag == "select" and name:
            self._select, self._first_option, self._selected = name, None, False
        elif tag == "option" and self._select is not None:
            value = a.get("value", "")
            if self._first_option is None:
                self._first_option = value
            if "selected" in a:
                self.data[self._select], self._selected = value, True
        elif tag == "textarea" and name:
            self._textarea = name
            self.data[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.inside:
            self.inside = False
        elif tag == "select" and self._select is not None:
            if not self._selected:  # a browser posts the first option when none is selected
                self.data[self._select] = self._first_option or ""
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.data[self._textarea] += data.removeprefix("\n") if not self.data[self._textarea] else data


def rendered_form_data(html: str, containing: str) -> dict[str, str]:
    """What the page's form with a field named ``containing`` would post, as a browser sends it."""
    parser = _FormFields()
    parser.feed(html)
    found = [form for form in parser.forms if containing in form]
    assert found, f"no form on the page has a field named {containing!r}"
    return found[0]
