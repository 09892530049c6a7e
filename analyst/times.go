package analyst

import (
	"fmt"
	"html/template"
	"time"
)

// withTimes is pages with ts and tsp bound to this handler's time zone.
//
// Times show in UTC, the zone the data, the CLI and the logs use, so an
// analyst can match them by eye. "The local time on hover" cannot be the
// browser's zone without script, which the page does not run (strict CSP);
// the server cannot know it (Accept-Language names no zone). So the hover
// title gives the operator's configured zone (Config.TimeZone, the team's
// zone) when there is one, and always the age ("3 h ago") at rendering,
// which needs no zone at all.
func (h *handler) withTimes(t *template.Template) *template.Template {
	c := template.Must(t.Clone())
	zone := h.cfg.TimeZone
	ts := func(at time.Time) template.HTML { return timeElem(at, time.Now(), zone) }
	return c.Funcs(template.FuncMap{
		"ts": ts,
		"tsp": func(at *time.Time) template.HTML {
			if at == nil {
				return ""
			}
			return ts(*at)
		},
	})
}

// timeElem renders at as <time> in UTC with the zone's time and the age at
// now in its title.
func timeElem(at, now time.Time, zone *time.Location) template.HTML {
	if at.IsZero() {
		return ""
	}
	title := age(now.Sub(at))
	if zone != nil && zone != time.UTC {
		title = "local: " + at.In(zone).Format("2006-01-02 15:04:05 MST") + " · " + title
	}
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s">%s</time>`,
		at.UTC().Format(time.RFC3339Nano), template.HTMLEscapeString(title), at.UTC().Format("2006-01-02 15:04:05Z")))
}

// age says how long ago d was, in the largest whole unit.
func age(d time.Duration) string {
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%d s", int(d/time.Second))
	case d < time.Hour:
		s = fmt.Sprintf("%d min", int(d/time.Minute))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%d h", int(d/time.Hour))
	default:
		s = fmt.Sprintf("%d d", int(d/(24*time.Hour)))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}
