"""axe-core, run inside Chromium on a page of the dashboard: the WCAG 2.1 A and AA rules, contrast
included. The script comes from the npm package in end2end/node_modules (installed by test.sh from
end2end/package-lock.json), never from the network."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page

AXE_JS = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
RULES = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
BLOCKING = ("serious", "critical")


def serious_violations(page: Page) -> list[str]:
    """One line per serious or critical violation on the page as it is now: rule, impact, help,
    and the first few elements it was found on. The page's context must run JavaScript."""
    assert AXE_JS.is_file(), f"{AXE_JS} is missing: run ./test.sh, which installs it with npm ci"
    page.add_script_tag(path=str(AXE_JS))
    result = page.evaluate("(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}})", RULES)
    lines = []
    for violation in result["violations"]:
        if violation["impact"] in BLOCKING:
            where = ", ".join(" ".join(node["target"]) for node in violation["nodes"][:4])
            lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']} at {where}")
    return lines
