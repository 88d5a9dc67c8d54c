(() => {
  const root = document.querySelector('[data-live]');
  if (!root || !window.EventSource) return;
  const job = root.dataset.job;
  const listed = root.dataset.state;
  const changed = () => {
    const note = root.querySelector('[data-changed]');
    if (note) note.hidden = false;
  };
  const tab = listed && document.querySelector(`[data-count="${listed}"]`);
  let shown = tab ? Number(tab.textContent) : null;
  const source = new EventSource(root.dataset.live);
  source.addEventListener('update', (message) => {
    const update = JSON.parse(message.data);
    const notice = document.querySelector('[data-unavailable]');
    if (notice) notice.hidden = !update.unavailable;
    if (update.unavailable) return;
    for (const [state, n] of Object.entries(update.counts)) {
      for (const el of document.querySelectorAll(`[data-count="${state}"]`)) el.textContent = n;
    }
    const moved = update.jobs || {};
    if (job !== undefined) {
      if (!(job in moved)) return;
      const state = moved[job];
      const chip = root.querySelector('h1 [data-state]');
      if (chip) {
        chip.textContent = state ?? 'removed';
        chip.className = 'chip' + (state === 'completed' ? ' good' : state === 'failed' ? ' bad' : '');
      }
      changed();
      return;
    }
    for (const row of root.querySelectorAll('tr[data-job]')) {
      if (!(row.dataset.job in moved)) continue;
      const state = moved[row.dataset.job];
      if (state === listed) continue;
      row.classList.add('moved');
      const cell = row.querySelector('[data-live-state]');
      if (cell) cell.textContent = '→ ' + (state ?? 'removed');
    }
    const count = update.counts[listed];
    if (shown !== null && count !== shown) changed();
    shown = count;
  });
})();
