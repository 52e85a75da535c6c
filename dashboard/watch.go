package dashboard

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// journalWatch follows the journal's writes under <state>/apps: the apps
// directory, each app's directory and its ops directory (every journal
// write is a rename into one of them).
type journalWatch struct {
	w    *fsnotify.Watcher
	done chan struct{}
}

// watchJournal starts watching stateDir's journal; each write sends on
// changes (without blocking: one pending signal stands for many). The
// apps directory is created when missing, so an empty state directory is
// watched too.
func watchJournal(stateDir string, changes chan<- struct{}) (*journalWatch, error) {
	apps := filepath.Join(stateDir, "apps")
	if err := os.MkdirAll(apps, 0o700); err != nil {
		return nil, fmt.Errorf("dashboard: watch the journal: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("dashboard: watch the journal (inotify): %w", err)
	}
	j := &journalWatch{w: w, done: make(chan struct{})}
	if err := w.Add(apps); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("dashboard: watch %s: %w", apps, err)
	}
	entries, _ := os.ReadDir(apps)
	for _, e := range entries {
		if e.IsDir() {
			j.addApp(filepath.Join(apps, e.Name()))
		}
	}
	go j.loop(apps, changes)
	return j, nil
}

// addApp watches one app's directory and its ops directory (best effort:
// a directory that is not there yet is added when it is created).
func (j *journalWatch) addApp(dir string) {
	_ = j.w.Add(dir)
	_ = j.w.Add(filepath.Join(dir, "ops"))
}

func (j *journalWatch) loop(apps string, changes chan<- struct{}) {
	defer close(j.done)
	for {
		select {
		case ev, ok := <-j.w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Create) {
				if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
					switch filepath.Dir(ev.Name) {
					case apps:
						j.addApp(ev.Name)
					default:
						if filepath.Base(ev.Name) == "ops" {
							_ = j.w.Add(ev.Name)
						}
					}
				}
			}
			select {
			case changes <- struct{}{}:
			default:
			}
		case _, ok := <-j.w.Errors:
			if !ok {
				return
			}
		}
	}
}

// Close stops the watch and waits for its goroutine.
func (j *journalWatch) Close() {
	_ = j.w.Close()
	<-j.done
}
