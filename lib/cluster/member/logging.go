package member

import (
	"context"
	"log/slog"
	"strings"
)

// logWriter turns memberlist's log lines ("[WARN] memberlist: text") into slog
// records at Debug, keeping memberlist's own level as an attribute. Its
// failure detection reports routine trouble (a refused probe, a discarded
// packet with another label) as errors, so it stays at Debug; this package
// logs what an operator must see itself.
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	ctx := context.Background()
	if !w.log.Enabled(ctx, slog.LevelDebug) {
		return len(p), nil
	}
	level, text := splitLogLine(string(p))
	w.log.Debug("memberlist", "level", level, "detail", text)
	return len(p), nil
}

// splitLogLine splits "[LEVEL] memberlist: text" into its level and text.
func splitLogLine(line string) (level, text string) {
	line = strings.TrimSpace(line)
	if rest, ok := strings.CutPrefix(line, "["); ok {
		if l, r, ok := strings.Cut(rest, "]"); ok {
			level, line = strings.ToLower(l), strings.TrimSpace(r)
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	return level, line
}
