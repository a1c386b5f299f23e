package tui

import "charm.land/bubbles/v2/key"

// keyMap holds every key binding of the UI, in one place; the help screen lists them in
// this order, each on one line of at most 80 columns (a description of 64 at most).
type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Pause, Focus, Zoom, Filter              key.Binding
	Write, WriteOne, Copy, CopyCursor       key.Binding
	Help, Back, Quit                        key.Binding
}

func defaultKeys() keyMap {
	b := func(keys []string, k, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(k, desc))
	}
	return keyMap{
		Up:         b([]string{"up", "k"}, "↑ k", "up (older events load above the oldest); scroll up in detail"),
		Down:       b([]string{"down", "j"}, "↓ j", "down; scroll down in detail"),
		PageUp:     b([]string{"pgup", "ctrl+b", "ctrl+u"}, "pgup ctrl+b", "page up"),
		PageDown:   b([]string{"pgdown", "ctrl+f", "ctrl+d"}, "pgdn ctrl+f", "page down"),
		Top:        b([]string{"home", "g"}, "home g", "oldest loaded event"),
		Bottom:     b([]string{"end", "G"}, "end G", "newest event, and follow the head again"),
		Pause:      b([]string{"space"}, "space", "pause / resume (paused: new events are counted, not shown)"),
		Focus:      b([]string{"tab"}, "tab", "switch between the list and the detail pane"),
		Zoom:       b([]string{"enter"}, "enter", "detail pane full screen, or back"),
		Filter:     b([]string{"/"}, "/", "edit the filter query (enter applies it, esc cancels)"),
		Write:      b([]string{"w"}, "w", "write the loaded events to a file, as JSON lines"),
		WriteOne:   b([]string{"W"}, "W", "write the selected event to a file, as a JSON line"),
		Copy:       b([]string{"c"}, "c", "copy the selected event's CloudEvent to the clipboard (OSC 52)"),
		CopyCursor: b([]string{"C"}, "C", "copy the selected event's cursor to the clipboard (OSC 52)"),
		Help:       b([]string{"?"}, "?", "this help; q quits, arrows scroll it, other keys close it"),
		Back:       b([]string{"esc"}, "esc", "back: close a prompt or the full-screen detail"),
		Quit:       b([]string{"q", "ctrl+c"}, "q ctrl+c", "quit, restoring the terminal"),
	}
}

// all lists the bindings in the order the help shows them.
func (k keyMap) all() []key.Binding {
	return []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Pause, k.Focus, k.Zoom,
		k.Filter, k.Write, k.WriteOne, k.Copy, k.CopyCursor, k.Help, k.Back, k.Quit}
}
