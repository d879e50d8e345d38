"""The keys that drive a session, in one place: the actions bind them and the hints name
them. The F-key comes first: it works from anywhere, a text field included; the letter key
works only where no text field has the focus (there it types, as it should)."""

from __future__ import annotations

STEP = ("F10", "Space")
RUN = ("F5", "R")
CONTINUE = "F6"
RESET = "Shift+F5"
