// Package browser drives headless Chromium (Debian's chromium package; scripts/system-packages.sh
// installs it) over the pages `parley serve` shows behind sign-in: they load without console
// errors, the timeline draws the demo repository's claims, sign-in is required, and a person who
// may not read the repository gets 404. A screenshot of a field's page is kept as an artefact.
//
// It is a module of its own so that chromedp stays out of the product's dependencies.
package browser
